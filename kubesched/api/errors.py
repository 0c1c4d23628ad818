"""Typed errors for bad input. Each names the object and the field, the way apiserver validation does."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


class KubeschedError(Exception):
    """Base class of every error kubesched raises on purpose."""


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped, so that an error about
    user input (a key holding a newline, say) stays the single line a terminal user reads."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] for ch in text)


class InvalidQuantity(KubeschedError, ValueError):
    def __init__(self, text: str, detail: str) -> None:
        super().__init__(f'"{text}": {detail}')
        self.text = text
        self.detail = detail


class _Omitted:
    """``field.OmitValueType``: an error whose value is not shown (an object, a list)."""

    def __repr__(self) -> str:
        return "<omitted>"


#: The value of an error that shows none: ``spec: Invalid value: <detail>``.
OMIT_VALUE = _Omitted()


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path: ``spec.containers[0].resources.requests[cpu]``."""

    path: str
    kind: str  # Invalid value, Required value, Unsupported value, Duplicate value, Forbidden
    detail: str
    value: object = field(default=None)

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"

    def body(self) -> str:
        """``field.Error.ErrorBody``: the message without its field path (a Status cause's message)."""
        if self.kind == "Invalid value" and self.value is OMIT_VALUE:
            return f"Invalid value: {self.detail}"
        if self.kind == "Invalid value":
            shown = json.dumps(self.value, ensure_ascii=False) if isinstance(self.value, str) else _go_repr(self.value)
            return f"Invalid value: {shown}: {self.detail}"
        if self.kind == "Unsupported value":
            shown = json.dumps(self.value, ensure_ascii=False) if isinstance(self.value, str) else f'"{self.value}"'
            return f"Unsupported value: {shown}: {self.detail}"
        if self.detail:
            return f"{self.kind}: {self.detail}" if self.kind else self.detail
        return self.kind


def aggregate(errors: Sequence[object]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``, as apiserver and kubectl print several errors:
    one alone, several as ``[a, b]`` with repeated messages dropped."""
    messages = list(dict.fromkeys(str(e) for e in errors))
    if len(messages) <= 1:
        return "".join(messages)
    return "[" + ", ".join(messages) + "]"


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path, "Invalid value", detail, value)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value", detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "Forbidden", detail)


def unsupported(path: str, value: object, supported: list[str]) -> FieldError:
    return FieldError(path, "Unsupported value", "supported values: " + ", ".join(f'"{s}"' for s in supported), value)


class _GoMap(dict[str, str]):
    """A string map printed as Go's ``%#v`` prints it in validation messages."""

    def __str__(self) -> str:
        inner = ", ".join(f'"{k}":"{v}"' for k, v in sorted(self.items()))
        return f"map[string]string{{{inner}}}"


def go_map(value: Mapping[str, str]) -> dict[str, str]:
    """``value`` as the bad value of a field error about a ``map[string]string``."""
    return _GoMap(value)


class _Stringer:
    """A value Go prints with its ``String()`` method: unquoted."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        return "null" if self.value is None else str(self.value)


def go_stringer(value: object) -> object:
    """``value`` as the bad value of a field error about a type with a ``String()`` method
    (``intstr.IntOrString``: ``5`` and ``25%`` both unquoted)."""
    return _Stringer(value)


def go_strings(values: Sequence[str] | None) -> object:
    """``values`` as the bad value of a field error about a ``[]string``, printed as ``%#v`` prints it:
    ``[]string{"a", "b"}``, ``[]string{}``, or ``[]string(nil)`` for None."""
    if values is None:
        return _Stringer("[]string(nil)")
    return _Stringer("[]string{" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "}")


def _go_repr(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class InvalidObject(KubeschedError, ValueError):
    """A Kubernetes object that cannot be accepted. ``str()`` reads like apiserver's 422 message."""

    def __init__(self, kind: str, name: str, errors: list[FieldError], source: str = "") -> None:
        self.kind = kind
        self.name = name
        self.errors = errors
        self.source = source
        where = f"{source}: " if source else ""
        details = aggregate(errors) if errors else "invalid object"
        super().__init__(one_line(f'{where}{kind} "{name}" is invalid: {details}'))


class ManifestError(KubeschedError, ValueError):
    """A manifest file that cannot be read at all (syntax, not an object, missing kind)."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(one_line(f"{source}: {message}"))
        self.source = source
        self.message = message


class ConfigError(KubeschedError, ValueError):
    """An invalid KubeSchedulerConfiguration; lists every field error, as upstream's aggregate does."""

    def __init__(self, errors: list[FieldError] | list[str], source: str = "") -> None:
        self.errors = errors
        where = f"{source}: " if source else ""
        super().__init__(one_line(f"{where}invalid KubeSchedulerConfiguration: {aggregate(errors)}"))


class UnknownPlugin(KubeschedError, ValueError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f'plugin "{name}" does not exist; known plugins: {", ".join(sorted(known))}')
        self.name = name


class FileUnreadable(KubeschedError, OSError):
    """A file named on the command line that cannot be read (missing, a directory, no permission).
    ``str()`` names the flag and the path: ``--config /missing.yaml: no such file or directory``."""

    def __init__(self, flag: str, path: str, error: OSError) -> None:
        reason = error.strerror.lower() if error.strerror else str(error)
        super().__init__(f"{flag} {path}: {reason}")
        self.flag = flag
        self.path = path


class NoObjects(KubeschedError, ValueError):
    """Manifests that hold no object at all: an empty file or a directory without manifests is far
    more likely a wrong path than a wish to simulate nothing."""

    def __init__(self, paths: Sequence[str]) -> None:
        super().__init__(f"no objects found in {', '.join(paths)} (expected YAML or JSON manifests: .yaml, .yml, .json)")
        self.paths = list(paths)


class ListenError(KubeschedError, OSError):
    """A server that cannot listen on the address and port asked for."""

    def __init__(self, address: str, port: int, error: OSError) -> None:
        reason = os.strerror(error.errno).lower() if error.errno else str(error)
        hint = "; another process is listening there: pick another --port, or --port 0 for a free one" \
            if error.errno == errno.EADDRINUSE else ""
        super().__init__(f"cannot listen on {address}:{port}: {reason}{hint}")
        self.address = address
        self.port = port
