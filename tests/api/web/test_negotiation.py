"""Accept negotiation as RFC 9110 describes it, on the Accept headers real clients send."""

from __future__ import annotations

import pytest

from ocr_api.web.negotiation import choose

RESULTS = ["application/json", "text/markdown", "application/pdf"]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "application/json"),  # no header: the route's default
        ("*/*", "application/json"),  # curl
        ("application/pdf", "application/pdf"),
        ("text/*", "text/markdown"),
        # a browser: html first, then anything at q=0.8: the default wins the tie
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "application/json"),
        ("application/json;q=0.1, application/pdf", "application/pdf"),
        ("application/*;q=0.5, application/pdf;q=0", "application/json"),
        ("image/png", None),
        ("application/pdf;q=0", None),
    ],
)
def test_the_client_gets_what_it_prefers(accept: str | None, expected: str | None) -> None:
    assert choose(accept, RESULTS) == expected
