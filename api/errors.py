"""Errors as JSON: `{"error": {"status": 400, "message": "...", "errors": [...]}}`."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answered with `status` and a JSON body (`errors`: every problem found)."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: Sequence[str] = (),
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message = status, message
        self.errors, self.headers = list(errors), headers or {}


def error_response(
    status: int,
    message: str,
    errors: Sequence[str] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict = {"status": status, "message": message}
    if errors:
        body["errors"] = list(errors)
    return JSONResponse({"error": body}, status_code=status, headers=headers)


async def on_api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.errors, exc.headers)


async def on_http_exception(_request: Request, exc: Exception) -> Response:
    """Starlette's own (404 no such route, 405 wrong method) as JSON too."""
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, str(exc.detail), headers=exc.headers)


async def on_server_error(request: Request, exc: Exception) -> Response:
    log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal error (the server's log has the details)")


EXCEPTION_HANDLERS = {
    ApiError: on_api_error,
    HTTPException: on_http_exception,
    Exception: on_server_error,
}
