"""The app's edges that need no running service: CORS as configured, and a bug's 500 still a
problem a client can quote."""

from __future__ import annotations

from fastapi.testclient import TestClient

from ocr_api.main import create_app
from uocr_core.settings import load_settings

ORIGIN = "https://archive.example.org"


def _preflight(client: TestClient, origin: str) -> dict[str, str]:
    response = client.options(
        "/v1/jobs",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,idempotency-key",
        },
    )
    return dict(response.headers)


def test_no_origin_is_allowed_unless_configured() -> None:
    with TestClient(create_app(load_settings())) as client:
        assert "access-control-allow-origin" not in _preflight(client, ORIGIN)


def test_a_configured_origin_may_call_and_read_the_headers_it_needs() -> None:
    with TestClient(create_app(load_settings(cors_allow_origins=(ORIGIN,)))) as client:
        allowed = _preflight(client, ORIGIN)
        assert allowed["access-control-allow-origin"] == ORIGIN
        assert "idempotency-key" in allowed["access-control-allow-headers"].lower()
        assert "access-control-allow-origin" not in _preflight(client, "https://evil.example")
        answer = client.get("/healthz", headers={"Origin": ORIGIN})
        exposed = answer.headers["access-control-expose-headers"].lower()
        assert "x-request-id" in exposed and "location" in exposed and "etag" in exposed


def test_a_bug_answers_a_problem_with_the_request_id() -> None:
    app = create_app(load_settings())

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom", headers={"X-Request-ID": "req-42"})
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == "urn:uocr:problem:internal-error"
    assert body["request_id"] == "req-42" and response.headers["x-request-id"] == "req-42"
    assert "a bug" not in response.text  # the traceback stays in the log
