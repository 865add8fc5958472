"""The API's OpenAPI 3.1 schema, as data (tests/integration/test_api.py checks that every
route is in it, with its methods)."""

from __future__ import annotations

from typing import Any

_ERROR = {"$ref": "#/components/responses/Error"}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(code): _ERROR for code in codes}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": schema, "description": description}


_CAMPAIGN = {
    "name": "campaign",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}
_JOB = {"name": "job", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
_OBJECT = {"type": "object"}
_ROWS = {"type": "array", "items": _OBJECT}
_READ = [{"bearer": []}]  # any role, in the thing's project (another project's: 404)
_WRITE = [{"bearer": []}]  # admin, or submit in the thing's project (read role or scope: 403)

_SUBMIT_FIELDS: dict[str, Any] = {
    "devices": {"type": "string", "default": "all", "description": "device selector"},
    "configs": {"type": "string", "default": "cpu,gpu-fp32,gpu-fp16"},
    "runs": {"type": "integer", "minimum": 1, "default": 50},
    "diff_runs": {"type": "integer", "minimum": 0, "default": 20},
    "priority": {"type": "integer", "minimum": 0, "maximum": 9, "default": 0},
    "timeout": {"type": "number", "description": "soft time limit per job, s"},
    "name": {"type": "string", "description": "campaign name"},
    "model_name": {"type": "string", "description": "the model's lineage name (one model)"},
    "max_model_mb": {"type": "number", "description": "a model cap below the server's"},
    "project": {
        "type": "string",
        "description": "the project (team) the campaign belongs to; default: the caller's "
        "only project (an admin's: default); required for a member of several",
    },
}

_GATE_QUERY = [
    _CAMPAIGN,
    _query("baseline", {"type": "string"}, "a campaign id or name to judge against"),
    _query("regression_threshold", {"type": "number", "default": 5}, "percent"),
    _query(
        "no_confirm",
        {"type": "boolean"},
        "a suspect is a regression without a confirmation (default: one is needed, POST "
        ".../confirm)",
    ),
]
_ENDED = _query(
    "ended", {"type": "string", "maxLength": 200}, "why the wait ended early (said in the JUnit)"
)
_VERDICT = {
    "type": "object",
    "properties": {
        "exit_code": {"type": "integer"},
        "running": {"type": "integer"},
        "kept": {"type": "boolean"},
        "lines": {"type": "array", "items": {"type": "string"}},
        "junit": {"type": "string"},
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "devicefarm API",
        "version": "1",
        "description": "Submit TFLite models to the device farm, follow and cancel "
        "campaigns, re-run failed cells, read results, devices and allowlists. Every "
        "/v1 endpoint but /v1/health needs `Authorization: Bearer TOKEN` (a live token: "
        "not expired, not revoked). A user sees the campaigns, results, gates and models of "
        "the projects they belong to (an admin: all); another project's campaign or model "
        "is answered 404, as one that does not exist. Changing needs the submit role in "
        "the campaign's project and a token whose scope allows it (else 403).",
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "responses": {
            "Error": _json(
                {
                    "type": "object",
                    "properties": {
                        "error": {
                            "type": "object",
                            "properties": {
                                "status": {"type": "integer"},
                                "message": {"type": "string"},
                                "errors": {"type": "array", "items": {"type": "string"}},
                            },
                            "required": ["status", "message"],
                        }
                    },
                },
                "an error: bad input (400), no, unknown, expired or revoked token (401), "
                "a read-only user or token asking to change something, or a submission to a "
                "project the user may not submit to (403), nothing there or another "
                "project's (404), a body over the upload cap (413), a body of the wrong type "
                "(415)",
            )
        },
    },
    "paths": {
        "/openapi.json": {
            "get": {
                "summary": "this schema",
                "security": [],
                "responses": {"200": _json(_OBJECT, "the OpenAPI schema")},
            }
        },
        "/v1/health": {
            "get": {
                "summary": "whether the API and its database answer",
                "security": [],
                "responses": {"200": _json(_OBJECT, "up")} | _errors(503),
            }
        },
        "/v1/campaigns": {
            "post": {
                "summary": "submit a campaign: models × selected devices × configurations",
                "security": _WRITE,
                "parameters": [
                    _query("filename", {"type": "string"}, "the raw body's model file name")
                ]
                + [_query(k, v, v.get("description", k)) for k, v in _SUBMIT_FIELDS.items()],
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "model": {
                                        "type": "array",
                                        "items": {"type": "string", "format": "binary"},
                                    },
                                    "input": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                        "description": "each input value file's LAYER:SHAPE "
                                        "(as --input; empty for an .npz), its `input_file` "
                                        "part after it",
                                    },
                                    "input_file": {
                                        "type": "array",
                                        "items": {"type": "string", "format": "binary"},
                                        "description": "the raw values (or an .npz), after "
                                        "its `input` field",
                                    },
                                }
                                | _SUBMIT_FIELDS,
                                "required": ["model"],
                            }
                        },
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        },
                    },
                },
                "responses": {
                    "201": _json(
                        {
                            "type": "object",
                            "properties": {
                                "campaign": {"type": "integer"},
                                "project": {"type": "string"},
                                "jobs": {"type": "integer"},
                                "devices": {"type": "array", "items": {"type": "string"}},
                                "sent": {"type": "integer"},
                                "warnings": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                        "submitted",
                    )
                }
                | _errors(400, 401, 403, 413, 415),
            },
            "get": {
                "summary": "the latest campaigns of the caller's projects (an admin's: all), "
                "with their project, owner and jobs counted by state",
                "security": _READ,
                "responses": {"200": _json(_OBJECT, "{campaigns: [...]}")} | _errors(401),
            },
        },
        "/v1/campaigns/{campaign}": {
            "get": {
                "summary": "one campaign's counts by state and its jobs' key figures",
                "security": _READ,
                "parameters": [_CAMPAIGN],
                "responses": {"200": _json(_OBJECT, "counts and rows")} | _errors(401, 404),
            }
        },
        "/v1/campaigns/{campaign}/results": {
            "get": {
                "summary": "every job's figures, as JSON or CSV",
                "security": _READ,
                "parameters": [
                    _CAMPAIGN,
                    _query("format", {"enum": ["json", "csv"], "default": "json"}, "format"),
                    _query("full", {"type": "boolean"}, "every figure and the device facts"),
                ],
                "responses": {
                    "200": {
                        "description": "{campaign, results: [...]} or CSV",
                        "content": {
                            "application/json": {"schema": _OBJECT},
                            "text/csv": {"schema": {"type": "string"}},
                        },
                    }
                }
                | _errors(400, 401, 404),
            }
        },
        "/v1/campaigns/{campaign}/gate": {
            "get": {
                "summary": "the CI gate's verdict: exit code (0 passed, 1 failed, 3 regressed), "
                "summary lines and JUnit XML (jobs not ended are errors)",
                "security": _READ,
                "parameters": [*_GATE_QUERY, _ENDED],
                "responses": {"200": _json(_VERDICT, "the verdict")} | _errors(400, 401, 404),
            },
            "post": {
                "summary": "the verdict as GET gives it, kept with the campaign (`kept`; not "
                "while a job runs): `status` and `results` show it, as after `submit --wait`",
                "security": _WRITE,
                "parameters": _GATE_QUERY,
                "responses": {"200": _json(_VERDICT, "the verdict")}
                | _errors(400, 401, 403, 404, 415),
            },
        },
        "/v1/campaigns/{campaign}/confirm": {
            "post": {
                "summary": "start paired runs (baseline, candidate, alternating) for each "
                "suspect of the campaign that has none; the confirmation campaigns to wait for",
                "security": _WRITE,
                "parameters": [
                    _CAMPAIGN,
                    _query(
                        "baseline", {"type": "string"}, "a campaign id or name to judge against"
                    ),
                    _query("regression_threshold", {"type": "number", "default": 5}, "percent"),
                    _query("pairs", {"type": "integer", "default": 3}, "pairs per suspect"),
                ],
                "responses": {"200": _json(_OBJECT, "{campaign, suspects, confirmations}")}
                | _errors(400, 401, 403, 404, 415),
            }
        },
        "/v1/campaigns/{campaign}/cancel": {
            "post": {
                "summary": "cancel the campaign's queued, dispatched and running jobs",
                "security": _WRITE,
                "parameters": [_CAMPAIGN],
                "responses": {"200": _json(_OBJECT, "{campaign, cancelled}")}
                | _errors(401, 403, 404, 415),
            }
        },
        "/v1/campaigns/{campaign}/rerun": {
            "post": {
                "summary": "re-run the failed, timed-out and cancelled jobs as new attempts",
                "security": _WRITE,
                "parameters": [_CAMPAIGN],
                "responses": {"200": _json(_OBJECT, "{campaign, cells: [...], sent}")}
                | _errors(401, 403, 404, 415),
            }
        },
        "/v1/devices": {
            "get": {
                "summary": "registered devices, their facts, liveness and health",
                "security": _READ,
                "responses": {
                    "200": _json({"type": "object", "properties": {"devices": _ROWS}}, "devices")
                }
                | _errors(401),
            }
        },
        "/v1/allowlist": {
            "get": {
                "summary": "a model's GPU allowlist file (download): a model a job of the "
                "caller's projects ran, from their results only",
                "security": _READ,
                "parameters": [
                    _query("model", {"type": "string"}, "sha256, a prefix of it, or name")
                    | {"required": True},
                    _query(
                        "format",
                        {
                            "enum": ["devicedb-json", "devicedb-bin", "csv", "json"],
                            "default": "devicedb-json",
                        },
                        "file format",
                    ),
                    _query("min_speedup", {"type": "number", "default": 1.2}, "CPU / GPU"),
                    _query("max_error", {"type": "number"}, "largest inference-diff error"),
                    _query("require_full_delegation", {"type": "boolean"}, "no CPU fallback"),
                    _query("min_runs", {"type": "integer", "minimum": 1}, "runs needed"),
                ],
                "responses": {
                    "200": {
                        "description": "the file; its summary in X-Devicefarm-Summary",
                        "content": {
                            "application/json": {"schema": _OBJECT},
                            "application/octet-stream": {
                                "schema": {"type": "string", "format": "binary"}
                            },
                            "text/csv": {"schema": {"type": "string"}},
                        },
                    }
                }
                | _errors(400, 401, 404),
            }
        },
        "/v1/jobs/{job}/artifacts": {
            "get": {
                "summary": "a job's debug artifacts (logcat, tombstones, crash signal, "
                "conditions, the tool's output), each with its download path",
                "security": _READ,
                "parameters": [_JOB],
                "responses": {"200": _json(_OBJECT, "{job, artifacts: [...]}")} | _errors(401, 404),
            }
        },
        "/v1/jobs/{job}/artifacts/{attempt}/{name}": {
            "get": {
                "summary": "one artifact's bytes (as kept: the listing says when cut)",
                "security": _READ,
                "parameters": [
                    _JOB,
                    {
                        "name": "attempt",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer"},
                        "description": "the job's attempt",
                    },
                    {
                        "name": "name",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "the artifact's name",
                    },
                ],  # fmt: skip
                "responses": {
                    "200": {
                        "description": "the file",
                        "content": {
                            "application/octet-stream": {
                                "schema": {"type": "string", "format": "binary"}
                            }
                        },
                    }
                }
                | _errors(401, 404),
            }
        },
    },
}
