"""The one progress bar of the CLI: what is being done, a bar, n of N, time taken."""

from __future__ import annotations

from typing import Any


def progress_bar() -> Any:
    """A rich Progress (a context manager) with the CLI's columns."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
