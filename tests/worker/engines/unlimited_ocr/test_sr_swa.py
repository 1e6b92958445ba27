"""SR-SWA's read plan, torch-free: which prefix blocks a step may read."""

from __future__ import annotations

from ocr_worker.engines.unlimited_ocr.output.page_guard import PageGuard
from ocr_worker.engines.unlimited_ocr.step.sr_swa import BlockSelector, SrSwaSettings
from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import WorkspaceBlocks
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Segment, Sequence

MARK = 9  # "<PAGE>"


def _sequence() -> Sequence:
    """BOS (block 0), three pages of two 4-row blocks each (1-2, 3-4, 5-6), the prompt (7)."""
    guard = PageGuard(
        num_pages=3,
        eos_id=1,
        marker_ids=(MARK,),
        page_budget=100,
        token_text=lambda t: "<PAGE>" if t == MARK else " x",
    )
    segments = [Segment("bos", WorkspaceBlocks((0,), 1), 0)]
    for page in range(3):
        blocks = WorkspaceBlocks((1 + 2 * page, 2 + 2 * page), 8)
        segments.append(Segment("page", blocks, 1 + 8 * page, page_no=page + 1))
    segments.append(Segment("prompt", WorkspaceBlocks((7,), 3), 25))
    return Sequence("s", segments, WorkspaceBlocks((8, 9), 8), 8, guard, 100)


def _read(selector: BlockSelector, sequence: Sequence) -> list[tuple[int, ...]]:
    plan = selector.plan(sequence)
    assert plan is not None
    return [b.block_ids for b in plan.blocks]


def test_the_page_gate_follows_the_section_being_written() -> None:
    sequence = _sequence()
    selector = BlockSelector(SrSwaSettings(max_blocks=2), block_size=4)
    # Before any marker the model is about to write page 1; BOS and prompt are always read.
    assert _read(selector, sequence) == [(0,), (7,), (1,), (2,)]
    sequence.guard.observe(MARK)  # page 1's section opens
    assert _read(selector, sequence) == [(0,), (7,), (1,), (2,)]
    for token in (20, MARK):  # page 1's text, then page 2's marker
        sequence.guard.observe(token)
    assert _read(selector, sequence) == [(0,), (7,), (3,), (4,)]


def test_a_budget_covering_every_block_reads_the_whole_prefix() -> None:
    sequence = _sequence()
    sequence.guard.observe(MARK)
    assert BlockSelector(SrSwaSettings(max_blocks=6), block_size=4).plan(sequence) is None
