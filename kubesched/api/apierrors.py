"""API errors with apiserver's reasons, codes and messages (``k8s.io/apimachinery/pkg/api/errors``)."""

from __future__ import annotations

from typing import Any

from kubesched.api.errors import FieldError, KubeschedError, aggregate

#: ``metav1.CauseType`` of each ``field.ErrorType`` (its ``String()`` is what ``FieldError.kind`` holds).
CAUSE_TYPES = {
    "Not found": "FieldValueNotFound",
    "Required value": "FieldValueRequired",
    "Duplicate value": "FieldValueDuplicate",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Internal error": "InternalError",
}


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


class APIError(KubeschedError):
    """An error the API would return as a ``Status`` object."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str, *, kind: str = "", name: str = "", group: str = "", causes: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.name = name
        self.group = group
        self.causes = causes or []

    def status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        out = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            out["details"] = details
        return out


class NotFound(APIError):
    code = 404
    reason = "NotFound"

    @classmethod
    def of(cls, resource: str, name: str, group: str = "") -> NotFound:
        return cls(f'{_qualified(resource, group)} "{name}" not found', kind=resource, name=name, group=group)


class AlreadyExists(APIError):
    code = 409
    reason = "AlreadyExists"

    @classmethod
    def of(cls, resource: str, name: str, group: str = "") -> AlreadyExists:
        return cls(f'{_qualified(resource, group)} "{name}" already exists', kind=resource, name=name, group=group)


class Conflict(APIError):
    code = 409
    reason = "Conflict"

    @classmethod
    def of(cls, resource: str, name: str, detail: str, group: str = "") -> Conflict:
        return cls(f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {detail}', kind=resource,
                   name=name, group=group)


class Invalid(APIError):
    code = 422
    reason = "Invalid"

    @classmethod
    def of(cls, kind: str, name: str, errors: list[FieldError], group: str = "") -> Invalid:
        """``errors.NewInvalid``: one cause per field error."""
        causes = [{"reason": CAUSE_TYPES.get(e.kind, "FieldValueInvalid"), "message": e.body(), "field": e.path} for e in errors]
        return cls(f'{_qualified(kind, group)} "{name}" is invalid: {aggregate(errors)}', kind=kind, name=name, group=group,
                   causes=causes)


class BadRequest(APIError):
    code = 400
    reason = "BadRequest"


class Gone(APIError):
    code = 410
    reason = "Expired"


class Forbidden(APIError):
    code = 403
    reason = "Forbidden"

    @classmethod
    def of(cls, resource: str, name: str, detail: str, group: str = "") -> Forbidden:
        """``errors.NewForbidden`` (admission plugins name the object by its generateName when it has no name yet)."""
        subject = f'{_qualified(resource, group)} "{name}"' if name else _qualified(resource, group)
        return cls(f"{subject} is forbidden: {detail}", kind=resource, name=name, group=group)


class MethodNotAllowed(APIError):
    code = 405
    reason = "MethodNotAllowed"


class TooLarge(APIError):
    code = 413
    reason = "RequestEntityTooLarge"


class Unsupported(APIError):
    code = 415
    reason = "UnsupportedMediaType"


class Timeout(APIError):
    """504: the server could not answer in time; ``retry_after`` is the seconds a client should wait."""

    code = 504
    reason = "Timeout"

    def __init__(self, message: str, *, retry_after: int = 0, **details: Any) -> None:
        super().__init__(message, **details)
        self.retry_after = retry_after

    @classmethod
    def too_large_resource_version(cls, requested: int, current: int, retry_after: int) -> Timeout:
        """``storage.NewTooLargeResourceVersionError``: a read asked for a resourceVersion the server
        has not reached (after a restart that lost its history, say); clients relist."""
        return cls(f"Timeout: Too large resource version: {requested}, current: {current}", retry_after=retry_after,
                   causes=[{"reason": RESOURCE_VERSION_TOO_LARGE, "message": "Too large resource version"}])

    def is_resource_version_too_large(self) -> bool:
        return any(c.get("reason") == RESOURCE_VERSION_TOO_LARGE for c in self.causes)

    def status(self) -> dict[str, Any]:
        out = super().status()
        out.setdefault("details", {})["retryAfterSeconds"] = self.retry_after
        return out


#: ``metav1.CauseTypeResourceVersionTooLarge``.
RESOURCE_VERSION_TOO_LARGE = "ResourceVersionTooLarge"


class TooManyRequests(APIError):
    code = 429
    reason = "TooManyRequests"
