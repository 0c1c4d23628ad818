"""The review kinds: create-only requests answered from the authenticator and the authorizer,
never stored (kube-apiserver's ``tokenreviews``, ``selfsubjectreviews``, ``subjectaccessreviews``,
``selfsubjectaccessreviews``, ``localsubjectaccessreviews``).

``kubectl auth can-i`` creates a SelfSubjectAccessReview, ``kubectl auth whoami`` a
SelfSubjectReview; components that delegate authentication and authorization to the API server
(``kubesched run``'s endpoints, as kube-scheduler's) create TokenReviews and SubjectAccessReviews.
"""

from __future__ import annotations

from typing import Any

from kubesched.api.apierrors import BadRequest, Invalid, MethodNotAllowed
from kubesched.api.errors import FieldError
from kubesched.api.kinds import Kind
from kubesched.apiserver import codec
from kubesched.apiserver.authn import MASTERS, Authenticator, UserInfo
from kubesched.apiserver.rbac import Attributes, RBACAuthorizer

REVIEW_KINDS = frozenset({"TokenReview", "SelfSubjectReview", "SubjectAccessReview", "SelfSubjectAccessReview",
                          "LocalSubjectAccessReview", "SelfSubjectRulesReview"})
_EVERYTHING = ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]})


class Reviews:
    """Answers review requests for one server's authenticator and authorizer."""

    def __init__(self, authenticator: Authenticator, authorizer: RBACAuthorizer, *, always_allow: bool = False) -> None:
        """``always_allow``: the server authorizes nothing (``--insecure-allow-anonymous``), so
        every access review is allowed, as kube-apiserver's AlwaysAllow mode answers."""
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.always_allow = always_allow

    def create(self, kind: Kind, method: str, namespace: str | None, body: bytes, content_type: str,
               caller: UserInfo) -> dict:
        """The review of ``body`` with its ``status`` filled in (the body of a 201)."""
        if method != "POST":
            raise MethodNotAllowed("the server does not allow this method on the requested resource")
        review = codec.decode_body(body, content_type or codec.JSON, kind.kind) if body else {}
        if not isinstance(review, dict):
            raise BadRequest(f"the object provided is unrecognized (must be of type {kind.kind})")
        if review.get("kind") not in (None, kind.kind) or review.get("apiVersion") not in (None, kind.api_version):
            raise BadRequest(f'{review.get("kind")} in version "{review.get("apiVersion")}" cannot be handled as a {kind.kind}')
        review["apiVersion"], review["kind"] = kind.api_version, kind.kind
        review.setdefault("metadata", {})
        spec = review.get("spec")
        if spec is not None and not isinstance(spec, dict):
            raise _invalid(kind, "spec", spec, "must be an object")
        review["spec"] = spec = spec or {}
        if kind.kind == "TokenReview":
            review["status"] = self._token_review(kind, spec)
        elif kind.kind == "SelfSubjectReview":
            review["status"] = {"userInfo": caller.as_review()}
        elif kind.kind == "SelfSubjectRulesReview":
            review["status"] = self._rules_review(caller, str(spec.get("namespace") or ""))
        else:
            subject = caller if kind.kind == "SelfSubjectAccessReview" else _spec_user(kind, spec)
            review["status"] = self._access_review(kind, spec, subject, namespace)
        return review

    def _token_review(self, kind: Kind, spec: dict) -> dict:
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise _invalid(kind, "spec.token", token or "", "token must be specified" if not token else "must be a string")
        user = self.authenticator.review(token)
        if user is None:
            return {"authenticated": False, "user": {}, "error": "invalid bearer token"}
        return {"authenticated": True, "user": user.as_review(), "audiences": list(spec.get("audiences") or [])}

    def _rules_review(self, caller: UserInfo, namespace: str) -> dict:
        """``kubectl auth can-i --list``: every rule that applies to the caller in ``namespace``
        (``system:masters`` and an authorizer that allows everything report ``*`` for both)."""
        if self.always_allow or MASTERS in caller.groups:
            rules: list[dict] = list(_EVERYTHING)
        else:
            rules = [rule for grant in self.authorizer.grants_for(caller, namespace)
                     for rule in self.authorizer.rules_of(grant)]
        resource, non_resource = [], []
        for rule in rules:
            if rule.get("nonResourceURLs"):
                non_resource.append({"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])})
            else:
                entry = {key: list(rule.get(key) or []) for key in ("verbs", "apiGroups", "resources")}
                if rule.get("resourceNames"):
                    entry["resourceNames"] = list(rule["resourceNames"])
                resource.append(entry)
        return {"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": False}

    def _access_review(self, kind: Kind, spec: dict, subject: UserInfo, namespace: str | None) -> dict:
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (resource is None) == (non_resource is None):
            raise _invalid(kind, "spec.resourceAttributes", resource,
                           "exactly one of nonResourceAttributes or resourceAttributes must be specified")
        if resource is not None:
            ra = _object(kind, "spec.resourceAttributes", resource)
            target_ns = str(ra.get("namespace") or "")
            if kind.kind == "LocalSubjectAccessReview" and target_ns != (namespace or ""):
                raise _invalid(kind, "spec.resourceAttributes.namespace", target_ns,
                               "must match metadata.namespace")
            attrs = Attributes(subject, str(ra.get("verb") or ""), True, api_group=str(ra.get("group") or ""),
                               api_version=str(ra.get("version") or ""), resource=str(ra.get("resource") or ""),
                               subresource=str(ra.get("subresource") or ""), namespace=target_ns,
                               name=str(ra.get("name") or ""))
        else:
            nra = _object(kind, "spec.nonResourceAttributes", non_resource)
            attrs = Attributes(subject, str(nra.get("verb") or ""), False, path=str(nra.get("path") or ""))
        allowed, reason = (True, "") if self.always_allow else self.authorizer.decide(attrs)
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return status


def _spec_user(kind: Kind, spec: dict) -> UserInfo:
    """The subject a (Local)SubjectAccessReview asks about: ``user``, ``uid``, ``groups``, ``extra``."""
    user, groups = spec.get("user") or "", spec.get("groups") or []
    if not isinstance(user, str):
        raise _invalid(kind, "spec.user", user, "must be a string")
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise _invalid(kind, "spec.groups", groups, "must be a list of strings")
    if not user and not groups:
        raise _invalid(kind, "spec.user", user, "at least one of user or group must be specified")
    extra = spec.get("extra") or {}
    return UserInfo(user, uid=str(spec.get("uid") or ""), groups=tuple(groups),
                    extra={str(k): list(v) for k, v in extra.items()} if isinstance(extra, dict) else {})


def _object(kind: Kind, path: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise _invalid(kind, path, value, "must be an object")
    return value


def _invalid(kind: Kind, path: str, value: Any, detail: str) -> Invalid:
    return Invalid.of(kind.kind, "", [FieldError(path, "Invalid value", detail, value)], kind.group)
