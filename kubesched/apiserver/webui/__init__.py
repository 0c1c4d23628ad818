"""The web UI of the API server: static files under ``/ui/`` and the one-time login under ``/ui/login``.

The files (plain HTML, JavaScript and CSS, no build step) ship in the package (``static/``). They
hold no data: the page reads and changes the cluster through the regular API paths, with a bearer
token like any other client, so RBAC applies to it as to kubectl. Serving them needs no credential.

How the page gets its token: at start the server makes a one-time login code, and ``kubesched up``
prints ``/ui/#login=CODE``. The fragment never leaves the browser except in the page's own POST to
``/ui/login``, which trades the code, once, for the admin token the kubeconfig carries; the page
keeps it in the tab's ``sessionStorage``. Without a code the page asks for a token (e.g. the one in
the kubeconfig). A server without authentication (``--insecure-allow-anonymous``) needs neither.
"""

from __future__ import annotations

import hmac
import mimetypes
import secrets
from collections.abc import Awaitable, Callable
from importlib import resources

import orjson
from aiohttp import web

from kubesched.api.apierrors import BadRequest
from kubesched.apiserver.authn import UserInfo
from kubesched.apiserver.handlers import NotFoundPath, method_not_allowed

#: The URL prefix of the UI.
UI_PREFIX = "/ui/"
#: The UI's own API (scenario runs): unlike the files, authenticated and authorized as any request.
UI_API_PREFIX = "/ui/api/"
#: What serves ``UI_API_PREFIX``: the request and its caller (None when security is off).
UIApi = Callable[[web.Request, UserInfo | None], Awaitable[web.StreamResponse]]
_HEADERS = {
    "Cache-Control": "no-cache, private",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; frame-ancestors 'none'",
}


class WebUI:
    """Serves the UI's files and exchanges login codes for ``token``."""

    def __init__(self, token: str) -> None:
        self.token = token
        self._codes: set[str] = set()
        #: The handler of ``/ui/api/`` (``kubesched up`` sets it; a 404 without it).
        self.api: UIApi | None = None

    def login_code(self) -> str:
        """A new code that ``/ui/login`` accepts once ("" when the server needs no credential)."""
        if not self.token:
            return ""
        code = secrets.token_urlsafe(24)
        self._codes.add(code)
        return code

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/ui":
            return web.Response(status=301, headers={"Location": UI_PREFIX})
        if path == UI_PREFIX + "login":
            return await self._login(request)
        if request.method not in ("GET", "HEAD"):
            raise method_not_allowed()
        name = path[len(UI_PREFIX):] or "index.html"
        return _static(name)

    async def handle_api(self, request: web.Request, user: UserInfo | None) -> web.StreamResponse:
        """A request under ``/ui/api/``, already authenticated and authorized by the server."""
        if self.api is None:
            raise NotFoundPath()
        return await self.api(request, user)

    async def _login(self, request: web.Request) -> web.Response:
        """POST ``{"code": CODE}``: the token, once per code; 401 for a code not (or no longer) valid."""
        if request.method != "POST":
            raise method_not_allowed()
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            raise BadRequest("login: the body must be a JSON object with a string field \"code\"") from None
        code = body.get("code") if isinstance(body, dict) else None
        if not isinstance(code, str) or not code:
            raise BadRequest("login: the body must be a JSON object with a string field \"code\"")
        found = next((c for c in self._codes if hmac.compare_digest(c, code)), None)
        if found is None:
            return web.Response(status=401, body=orjson.dumps({"message": "this login link was already used or is not valid; "
                                                                          "log in with the token from the kubeconfig"}),
                                headers={**_HEADERS, "Content-Type": "application/json"})
        self._codes.discard(found)
        return web.Response(body=orjson.dumps({"token": self.token}), headers={**_HEADERS, "Content-Type": "application/json"})


def _static(name: str) -> web.Response:
    """One file of ``static/`` (a flat directory: any other name is a 404)."""
    if "/" in name or name.startswith("."):
        raise NotFoundPath()
    entry = resources.files(__package__).joinpath("static", name)
    if not entry.is_file():
        raise NotFoundPath()
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if content_type.startswith("text/") or content_type == "application/javascript":
        content_type += "; charset=utf-8"
    return web.Response(body=entry.read_bytes(), headers={**_HEADERS, "Content-Type": content_type})

