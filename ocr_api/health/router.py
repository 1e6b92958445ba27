"""Liveness and readiness: ready means the database, the broker and the object store answer."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from ocr_api.deps import AppState, StateDep
from ocr_api.web import negotiation
from ocr_api.web.openapi import problems

router = APIRouter(
    tags=["health"],
    dependencies=[Depends(negotiation.known_query_only), Depends(negotiation.accepts_json)],
    responses=problems(406, 422),
)


class Liveness(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str]  # "ok", or "error: <what failed>"


@router.get("/healthz", response_model=Liveness)
def healthz() -> Liveness:
    """The process answers."""
    return Liveness(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "A dependency does not answer"}},
)
def readyz(state: StateDep) -> JSONResponse:
    """Ready when the database, the broker and the object store answer."""
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
