"""The decode rule: which prefix rows of a sequence each decode step reads.

Unlimited-OCR v1 was trained with R-SWA (``RSwa``): every step reads the whole prefix (BOS,
prompt, every page's visual tokens) and the window of recent generated tokens. SR-SWA
(``sr_swa.BlockSelector``) is an opt-in, training-free approximation on v1 weights that reads a
budget of prefix blocks. A faithful 2.0 rule (its learned block router) would be a third
implementation of ``DecodeRule``, once its reference code can be read and tested against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ocr_worker.engines.unlimited_ocr.workspace.kv_workspace import WorkspaceBlocks
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Sequence


class KeyPool(Protocol):
    """What a rule reads of the model runner: the key pool and block rows."""

    k_pool: torch.Tensor  # (layers, rows, heads, head_dim)

    def host_rows(self, blocks: WorkspaceBlocks, count: int | None = None) -> np.ndarray: ...

    def to_device(self, host: np.ndarray) -> torch.Tensor: ...


@dataclass(frozen=True)
class ReadPlan:
    """The prefix blocks a sequence may read this page: ``always`` (BOS, prompt) and the
    ``candidates``; ``scored`` when the candidates exceed the budget, so each layer's query
    picks among them (``DecodeRule.select``)."""

    always: list[WorkspaceBlocks]
    candidates: list[WorkspaceBlocks]
    scored: bool

    @property
    def blocks(self) -> list[WorkspaceBlocks]:
        return self.always + self.candidates


class DecodeRule(Protocol):
    # "r-swa", "sr-swa": what the logs and benches call it
    @property
    def name(self) -> str: ...

    @property
    def follows_page(self) -> bool:
        """Whether the rows read change with the page the guard has seen (then the batch's
        rows are rebuilt at each page, and a step's tokens are read before the next plan)."""
        ...

    def plan(self, sequence: Sequence) -> ReadPlan | None:
        """The blocks this sequence reads now; None: every prefix block (R-SWA's rows)."""
        ...

    def select(
        self,
        pool: KeyPool,
        layer: int,
        q: torch.Tensor,
        rows: torch.Tensor,
        valid: torch.Tensor,
        sequences: list[Sequence],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A layer's rows and their mask, chosen by its queries among a scored plan's."""
        ...


class RSwa:
    """v1's trained rule: every step reads every prefix row and the recent window."""

    name = "r-swa"
    follows_page = False

    def plan(self, sequence: Sequence) -> ReadPlan | None:
        return None

    def select(
        self,
        pool: KeyPool,
        layer: int,
        q: torch.Tensor,
        rows: torch.Tensor,
        valid: torch.Tensor,
        sequences: list[Sequence],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return rows, valid  # never asked: no plan of R-SWA's is scored


R_SWA = RSwa()
