"""The gather indices of one decode batch, shared by the runner and its CUDA graphs."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class BatchRows:
    """Gather indices for one batch composition: (B, R) pool rows, prefix part first."""

    rows: torch.Tensor
    prefix_valid: torch.Tensor
    ring_column: torch.Tensor  # ring slot of each column, -1 in the prefix part
    ring_rows: torch.Tensor  # (B, window) pool rows of each ring
    window: int
    scored: bool
