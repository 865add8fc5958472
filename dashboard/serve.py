"""What `devicefarm dashboard` serves: app.py as an ASGI app (st.App) behind a login and with
Streamlit's `/_stcore/metrics` turned off.

- The login is HTTP's, before Streamlit: `/_df/login` (a form: a user's token from the
  tokens file, or the shared password; throttled, dashboard/login_throttle.py) sets a signed
  cookie (dashboard/auth.py), so a reload keeps the login. Without that cookie a page
  request is sent to the login form (its path kept for after), and everything else,
  Streamlit's websocket, media files (downloads) and uploads included, is refused. The
  `read` role may not upload. `/_df/logout` ends the login.
- `/fleet`, the first page's own path, is sent to `/`, where Streamlit serves that page.
- Streamlit (1.67) always serves its OpenMetrics endpoint, without login and with no option
  to turn it off: it is answered 404 (under any base URL, doubled or trailing slashes).
- The pages' libraries are loaded as the server starts (dashboard/preload.py).
"""

from __future__ import annotations

import html
import math
import re
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import streamlit as st
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from dashboard import auth, login_throttle
from dashboard.preload import preload

#: The Streamlit route no visitor may read.
METRICS_ROUTE = "/_stcore/metrics"
LOGIN_ROUTE = "/_df/login"
LOGOUT_ROUTE = "/_df/logout"
#: Served without a login: the health check (compose, load balancers).
PUBLIC_ROUTES = ("/_stcore/health",)
UPLOAD_ROUTE = "/_stcore/upload_file"
#: app.py's first page: Streamlit serves it at `/` only and answers its own path with
#: "Page not found", so that path is sent to `/`.
DEFAULT_PAGE = "/fleet"
#: The largest login form body read, bytes.
MAX_FORM_BYTES = 8192
#: Streamlit's routes that are files or APIs, never pages.
_NOT_PAGES = ("/_stcore/", "/static/", "/media/", "/component/", "/app/static/")


def _normal(path: str) -> str:
    return re.sub("/+", "/", path).rstrip("/") or "/"


def blocked(path: str) -> bool:
    """Whether a request path reaches Streamlit's metrics route."""
    return _normal(path).endswith(METRICS_ROUTE)


def safe_next(target: str) -> str:
    """`target` when it is a path on this server, else `/` (no open redirect)."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or "\\" in target:
        return "/"
    return target


def login_page(next_path: str, message: str = "", status: int = 200) -> HTMLResponse:
    note = f'<p role="alert" id="message">{html.escape(message)}</p>' if message else ""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>devicefarm: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 24rem; margin: 4rem auto">
<h1>devicefarm</h1>{note}
<form method="post" action="{LOGIN_ROUTE}">
<input type="hidden" name="next" value="{html.escape(next_path)}">
<label for="secret">Password or token</label><br>
<input id="secret" name="secret" type="password" autocomplete="current-password" autofocus
 required style="width: 100%"><br><br>
<button type="submit">Log in</button>
</form></body></html>"""
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def _cookie(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            for part in value.decode("latin-1").split(";"):
                key, _, val = part.strip().partition("=")
                if key == auth.COOKIE:
                    return val
    return None


def _client(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


async def _form(receive: Any) -> dict[str, str] | None:
    """A urlencoded body's fields (None when it is larger than MAX_FORM_BYTES)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_FORM_BYTES:
            return None
        if not message.get("more_body"):
            break
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items()}


def _set_cookie(response: Response, scope: dict[str, Any], value: str, max_age: int) -> None:
    response.set_cookie(
        auth.COOKIE,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="lax",
        secure=scope.get("scheme") == "https",
    )


async def login(scope: dict[str, Any], receive: Any) -> Response:
    """The login form (GET) and an attempt (POST): throttled before the secret is read."""
    if scope["method"] != "POST":
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return login_page(safe_next(query.get("next", ["/"])[0]))
    fields = await _form(receive)
    if fields is None:
        return PlainTextResponse("Request too large", status_code=413)
    next_path = safe_next(fields.get("next", "/"))
    throttle, client, gate = login_throttle.shared(), _client(scope), auth.gate()
    wait = throttle.wait_s(client)
    if wait > 0:
        message = f"Too many wrong passwords: try again in {math.ceil(wait)} s."
        return login_page(next_path, message, 429)
    viewer = gate.check(fields.get("secret", ""))
    if viewer is None:
        throttle.failed(client)
        wait = throttle.wait_s(client)
        later = f" Next attempt in {math.ceil(wait)} s." if wait > 0 else ""
        return login_page(next_path, f"Wrong password or token.{later}", 401)
    throttle.succeeded(client)
    response = RedirectResponse(next_path, status_code=303)
    _set_cookie(response, scope, gate.issue(viewer), int(gate.session_s))
    return response


class Guard:
    """ASGI middleware: the metrics route answers 404; with a login configured, the login
    routes are served here and nothing else without a valid session cookie."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = _normal(scope.get("path", ""))
        if scope["type"] == "http" and blocked(path):
            await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
            return
        if scope["type"] == "http" and path == DEFAULT_PAGE:
            query = scope.get("query_string", b"").decode("latin-1")
            await RedirectResponse("/" + (f"?{query}" if query else ""), 308)(scope, receive, send)
            return
        gate = auth.gate()
        if not gate.enabled or path.endswith(PUBLIC_ROUTES):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and path.endswith(LOGIN_ROUTE):
            await (await login(scope, receive))(scope, receive, send)
            return
        if scope["type"] == "http" and path.endswith(LOGOUT_ROUTE):
            response = RedirectResponse(LOGIN_ROUTE, status_code=303)
            _set_cookie(response, scope, "", 0)
            await response(scope, receive, send)
            return
        viewer = gate.verify(_cookie(scope))
        if viewer is None:
            await self._refuse(scope, receive, send, path)
        elif UPLOAD_ROUTE in path and not viewer.can_write:
            await PlainTextResponse("Forbidden", status_code=403)(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: dict[str, Any], receive: Any, send: Any, path: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["method"] == "GET" and not any(p in path + "/" for p in _NOT_PAGES):
            query = scope.get("query_string", b"").decode("latin-1")
            target = quote(path + (f"?{query}" if query else ""), safe="")
            response: Response = RedirectResponse(f"{LOGIN_ROUTE}?next={target}", 303)
        else:
            response = PlainTextResponse("Log in first", status_code=401)
        await response(scope, receive, send)


preload()  # at start, so that no first view waits for the chart libraries' import
app = st.App("app.py", middleware=[Middleware(Guard)])
