"""Bounds checked before a submit is parsed or stored (milliseconds, no servers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from uocr_core.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from uocr_core.jobs.documents import sniff_kind
from uocr_core.jobs.input_limits import check_metadata, check_name, parse_metadata, read_limited


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit() -> None:
    pulled = []

    async def chunks() -> AsyncIterator[bytes]:
        for n in range(1000):  # 1000 x 1 KiB offered
            pulled.append(n)
            yield b"x" * 1024

    with pytest.raises(PayloadTooLarge):
        asyncio.run(read_limited(chunks(), limit=10 * 1024, declared=0))
    assert len(pulled) == 11  # read no further than the chunk that passed the limit
    with pytest.raises(PayloadTooLarge):
        asyncio.run(read_limited(chunks(), limit=10, declared=11))


def test_metadata_is_bounded_in_size_and_depth_without_exhausting_the_stack() -> None:
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    with pytest.raises(InvalidRequest, match="larger than"):
        parse_metadata(deep, max_bytes=16_384, max_depth=8)
    with pytest.raises(InvalidRequest, match="JSON object"):
        parse_metadata('{"a": ' * 5000 + "1" + "}" * 5000, max_bytes=10**6, max_depth=8)
    with pytest.raises(InvalidRequest, match="deeper than 8"):
        check_metadata({"a": [[[[[[[[1]]]]]]]]}, max_bytes=10**6, max_depth=8)
    assert check_metadata({"a": {"b": [1, "ok\n"]}}, max_bytes=100, max_depth=8)


def test_nul_and_control_characters_are_refused_in_names_and_metadata() -> None:
    with pytest.raises(InvalidRequest, match="control characters"):
        check_name("report\x00.pdf")
    with pytest.raises(InvalidRequest, match="control characters"):
        check_metadata({"k\x00": 1}, max_bytes=100, max_depth=8)
    with pytest.raises(InvalidRequest, match="control characters"):
        parse_metadata('{"a": "x\\u0000"}', max_bytes=100, max_depth=8)
    assert check_name("Rapport d'été (1).pdf") == "Rapport d'été (1).pdf"


def test_a_zip_carrying_a_pdf_header_is_not_a_pdf() -> None:
    with pytest.raises(UnsupportedMediaType, match="ZIP archive"):
        sniff_kind("a.pdf", b"PK\x03\x04" + b"\x00" * 30 + b"a.pdf%PDF-1.7\n")
    assert sniff_kind("a.pdf", b"junk\n%PDF-1.7\n") == "pdf"  # leading junk is still a PDF
