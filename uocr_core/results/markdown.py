"""result.md a page at a time: the page's marker, then its body (its Markdown, or a line saying
why it has none). The worker writes result.md with these; the chunks' offsets count them."""

from __future__ import annotations

from uocr_core.contracts import PageResult


def page_parts(result: PageResult, *, first: bool) -> tuple[str, str]:
    """(marker, body): what result.md holds for the page, the blank lines before it included."""
    body = (
        result.markdown
        if result.status == "succeeded"
        else f"> page {result.page} {result.status}: {result.error or ''}"
    )
    marker = ("" if first else "\n\n") + f"<!-- page {result.page} -->\n\n"
    return marker, body
