"""A cap on request bodies, checked before the body is read: a Content-Length over the cap
is answered 413 at once, and a body that streams past it (chunked) stops the request."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError, error_response


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body over the {limit / 1024**2:.1f} MiB upload cap")


class BodyLimit:
    """ASGI middleware capping every request body at `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                response = error_response(400, "bad Content-Length header")
                await response(scope, receive, send)
                return
            if int(declared) > limit:
                exc = too_large(limit)
                response = error_response(exc.status, exc.message, headers={"Connection": "close"})
                await response(scope, receive, send)
                return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise too_large(limit)
            return message

        await self.app(scope, counted, send)
