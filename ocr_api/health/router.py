"""Liveness and readiness: ready means the database, the broker and the object store answer."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from ocr_api.deps import AppState, StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(state: StateDep) -> JSONResponse:
    checks = {name: _check(probe, state) for name, probe in _PROBES.items()}
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)


def _check(probe, state: AppState) -> str:  # type: ignore[no-untyped-def]
    try:
        probe(state)
    except Exception as error:
        return f"error: {type(error).__name__}: {error}"[:300]
    return "ok"


def _database(state: AppState) -> None:
    with state.sessions() as session:
        session.execute(text("SELECT 1"))


_PROBES = {
    "database": _database,
    "broker": lambda state: state.redis.ping(),
    "object_store": lambda state: state.store.ping(),
}
