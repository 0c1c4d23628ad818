"""Who is calling: kube-apiserver's request authenticators, as kubesched serves them.

Order as kube-apiserver's union: a client certificate verified against ``--client-ca-file``
(user = CN, groups = O), then a bearer token from the static token table (``--token-auth-file``
lines plus the credentials the server mints at start). A bearer token that matches nothing is a
401 even when a certificate would have failed too. A request with no credentials at all is
anonymous (``system:anonymous``, group ``system:unauthenticated``) only on the health paths, as an
AuthenticationConfiguration whose ``anonymous.conditions`` list ``/healthz``, ``/livez``,
``/readyz``; elsewhere it is a 401. Every authenticated user also gets ``system:authenticated``.
"""

from __future__ import annotations

import csv
import io
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.api.apierrors import APIError

log = logging.getLogger(__name__)

ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
MASTERS = "system:masters"
KUBE_SCHEDULER = "system:kube-scheduler"
#: Paths an unauthenticated request may reach (as anonymous): the health checks.
ANONYMOUS_PATHS = ("/healthz", "/livez", "/readyz")
#: Users ``Authenticator`` keeps with their ``system:authenticated`` added (dropped all at once past this).
_AUTHENTICATED_KEPT = 1024


class Unauthorized(APIError):
    """401: the credentials presented identify nobody (``reason: Unauthorized``)."""

    code = 401
    reason = "Unauthorized"

    def __init__(self) -> None:
        super().__init__("Unauthorized")


@dataclass(frozen=True)
class UserInfo:
    """``user.Info``: the name, uid, groups and extra of an authenticated caller."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict, compare=False, hash=False)

    def as_review(self) -> dict:
        """The ``UserInfo`` of a TokenReview or SelfSubjectReview status."""
        out: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS_USER = UserInfo(ANONYMOUS, groups=(ALL_UNAUTHENTICATED,))


def with_authenticated(user: UserInfo) -> UserInfo:
    """``AuthenticatedGroupAdder``: ``system:authenticated`` added to a user that lacks it."""
    if ALL_AUTHENTICATED in user.groups or user.name == ANONYMOUS:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, ALL_AUTHENTICATED), user.extra)


class TokenTable:
    """Static bearer tokens: ``--token-auth-file`` (kube-apiserver's CSV:
    ``token,user,uid,"group1,group2"``) and tokens minted by the server for its own components."""

    def __init__(self) -> None:
        self._users: dict[str, UserInfo] = {}

    def __len__(self) -> int:
        return len(self._users)

    def add(self, token: str, user: UserInfo) -> None:
        self._users[token] = user

    def mint(self, name: str, groups: tuple[str, ...] = ()) -> str:
        """A new random token for ``name`` (256 bits, URL-safe), remembered in the table."""
        token = secrets.token_urlsafe(32)
        self.add(token, UserInfo(name, uid=name, groups=groups))
        return token

    def lookup(self, token: str) -> UserInfo | None:
        return self._users.get(token)

    def token_of(self, name: str) -> str:
        """The first token of the user ``name`` ("" when there is none)."""
        return next((token for token, user in self._users.items() if user.name == name), "")

    def load_file(self, path: str | Path) -> int:
        """Add the tokens of a token-auth file, as kube-apiserver's ``tokenfile.NewCSV``: a record
        with fewer than 3 fields stops the server (``ValueError`` naming the file and record); an
        empty token is skipped with a warning. Lines starting with ``#`` are comments. Returns how
        many tokens were read."""
        text = Path(path).expanduser().read_text()
        count = 0
        for number, record in enumerate(csv.reader(io.StringIO(text)), start=1):
            if not record or (len(record) == 1 and not record[0].strip()) or record[0].startswith("#"):
                continue
            if len(record) < 3:
                raise ValueError(f"token file {path}, record {number}: must have at least 3 columns "
                                 f"(token, user name, user uid), found {len(record)}")
            token, name, uid = (v.strip() for v in record[:3])
            if not token:
                log.warning("empty token has been found in token file %s, record %d", path, number)
                continue
            groups = tuple(g.strip() for g in record[3].split(",") if g.strip()) if len(record) > 3 else ()
            self.add(token, UserInfo(name, uid=uid, groups=groups))
            count += 1
        return count


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None without one); an empty or
    malformed bearer value counts as no token, as kube-apiserver's bearertoken authenticator."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    value = value.strip()
    return value or None


def certificate_user(peercert: dict | None) -> UserInfo | None:
    """The user of a verified client certificate (``ssl`` peer-certificate dict): CN is the name,
    every O a group, as kube-apiserver's ``CommonNameUserConversion``."""
    if not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not name:
                name = value
            elif key == "organizationName":
                groups.append(value)
    if not name:
        return None
    return UserInfo(name, groups=tuple(groups))


class Authenticator:
    """kube-apiserver's authenticator chain over a token table (see the module docstring)."""

    def __init__(self, tokens: TokenTable) -> None:
        self.tokens = tokens
        #: ``with_authenticated`` of each user the token table answered, by the answer's id
        #: (checked to be that very object): built once rather than on every request.
        self._authenticated: dict[int, tuple[UserInfo, UserInfo]] = {}

    def authenticate(self, path: str, authorization: str | None, peercert: dict | None) -> UserInfo:
        """The caller of a request; raises ``Unauthorized`` when it cannot be identified."""
        user = certificate_user(peercert)
        if user is not None:
            return with_authenticated(user)
        token = bearer_token(authorization)
        if token is not None:
            found = self.tokens.lookup(token)
            if found is None:
                raise Unauthorized()
            return self._with_authenticated(found)
        if authorization is None and is_anonymous_path(path):
            return ANONYMOUS_USER
        raise Unauthorized()

    def _with_authenticated(self, found: UserInfo) -> UserInfo:
        kept = self._authenticated.get(id(found))
        if kept is None or kept[0] is not found:
            if len(self._authenticated) >= _AUTHENTICATED_KEPT:
                self._authenticated.clear()
            kept = self._authenticated[id(found)] = (found, with_authenticated(found))
        return kept[1]

    def review(self, token: str) -> UserInfo | None:
        """The user of ``token`` for a TokenReview (None when it names nobody)."""
        found = self.tokens.lookup(token)
        return with_authenticated(found) if found is not None else None


def is_anonymous_path(path: str) -> bool:
    """``/healthz``, ``/livez``, ``/readyz`` and their individual checks (``/readyz/ping``)."""
    return any(path == p or path.startswith(p + "/") for p in ANONYMOUS_PATHS)
