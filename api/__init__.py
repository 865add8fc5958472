"""The farm's HTTP API: a Starlette app (served by uvicorn, `devicefarm api`) over the
orchestrator's submission, reports, cancel, re-run and allowlists, with per-user bearer
tokens (farm_core.accounts). `api.app.make_app` builds it; docs/api.md describes it."""
