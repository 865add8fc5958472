"""The API's Starlette app: its routes, its shared state (database, broker, tokens) and
its middleware (request rates, upload cap, JSON errors)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from farm_core.dispatch import Dispatcher

from . import artifacts, routes
from .auth import TokenStore
from .errors import EXCEPTION_HANDLERS
from .limits import BodyLimit
from .rate_limits import RateLimit, TokenBuckets
from .serve_settings import ServeSettings, from_env

#: Bytes a multipart body may carry beyond its models (part headers, form fields).
FORM_OVERHEAD_BYTES = 1024 * 1024


@dataclass
class FarmApi:
    """What every request shares: the database, the broker's dispatcher and the users."""

    engine: Engine
    dispatcher: Dispatcher
    tokens: TokenStore
    #: the most bytes of one model (default: the submission's model cap)
    max_model_bytes: int | None = None
    #: one submission at a time through the dispatcher (a Celery producer is not shared)
    send_lock: threading.Lock = field(default_factory=threading.Lock)

    def model_cap(self) -> int:
        from orchestrator.submit import max_model_bytes

        return self.max_model_bytes or max_model_bytes()


ROUTES = [
    Route("/openapi.json", routes.openapi, methods=["GET"]),
    Route("/v1/health", routes.health, methods=["GET"]),
    Route("/v1/campaigns", routes.submit_campaign, methods=["POST"]),
    Route("/v1/campaigns", routes.list_campaigns, methods=["GET"]),
    Route("/v1/campaigns/{campaign:int}", routes.campaign_status, methods=["GET"]),
    Route("/v1/campaigns/{campaign:int}/results", routes.campaign_results, methods=["GET"]),
    Route("/v1/campaigns/{campaign:int}/gate", routes.campaign_gate, methods=["GET"]),
    Route("/v1/campaigns/{campaign:int}/gate", routes.keep_gate, methods=["POST"]),
    Route("/v1/campaigns/{campaign:int}/confirm", routes.confirm_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign:int}/cancel", routes.cancel_campaign, methods=["POST"]),
    Route("/v1/campaigns/{campaign:int}/rerun", routes.rerun_campaign, methods=["POST"]),
    Route("/v1/devices", routes.devices, methods=["GET"]),
    Route("/v1/allowlist", routes.allowlist, methods=["GET"]),
    Route("/v1/jobs/{job:int}/artifacts", artifacts.list_artifacts, methods=["GET"]),
    Route(
        "/v1/jobs/{job:int}/artifacts/{attempt:int}/{name}",
        artifacts.download_artifact,
        methods=["GET"],
    ),
]


def rate_limit(settings: ServeSettings) -> Middleware:
    """Request rates per client address and per token (a rate of 0: that limit is off)."""

    def buckets(rate: float, burst: int) -> TokenBuckets | None:
        return TokenBuckets(rate, burst, settings.tracked_clients) if rate > 0 else None

    return Middleware(
        RateLimit,
        per_client=buckets(settings.rate_per_client, settings.burst_per_client),
        per_token=buckets(settings.rate_per_token, settings.burst_per_token),
    )


def make_app(
    farm: FarmApi,
    max_upload_bytes: int | None = None,
    settings: ServeSettings | None = None,
) -> Starlette:
    """The ASGI app. Request rates follow `settings` (default: the environment's, see
    api/serve_settings.py); request bodies are capped at `max_upload_bytes` (default: one
    model at the model cap, plus the form's own bytes)."""
    cap = max_upload_bytes or farm.model_cap() + FORM_OVERHEAD_BYTES
    settings = settings or from_env()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        farm.tokens.uses.flush()  # the last uses noted, not left to the timer
        farm.dispatcher.close()
        farm.engine.dispose()

    app = Starlette(
        routes=ROUTES,
        middleware=[rate_limit(settings), Middleware(BodyLimit, max_bytes=cap)],
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        lifespan=lifespan,
    )
    app.state.farm = farm
    return app
