"""Choosing each sequence's next token on the GPU, read back by the host one step later.

The page guard (host Python) decides what a sequence may not write next and what it must write;
its decision is applied to the logits on the device, so the chosen tokens can feed the next
decode step there. The host reads them with an asynchronous copy while that next step runs:
the guard's work and the read-back overlap the GPU's work instead of stalling it every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NO_TOKEN = -1  # a row the guard does not force


@dataclass
class Chosen:
    """A step's tokens, chosen on the device; ``read()`` waits for them on the host."""

    tokens: torch.Tensor  # (B,) on the device: what each row feeds next (bans and forcing applied)
    picks: torch.Tensor  # (2, B) on the host (pinned): the model's own choice, then ``tokens``
    ready: torch.cuda.Event | None  # None on the CPU, where the copy is already done
    # (B,) on the host (pinned): the log-probability the model gave each row's ``tokens``, for
    # the page's confidence (computed on the device, copied with the picks).
    logprobs: torch.Tensor | None = None

    def read(self) -> tuple[list[int], list[int]]:
        """(wanted, chosen) per row, once the copy has landed."""
        if self.ready is not None:
            self.ready.synchronize()
        wanted, chosen = self.picks.tolist()
        return wanted, chosen

    def read_logprobs(self) -> list[float]:
        """Each row's log-probability of its token (after ``read``: the same copy)."""
        if self.ready is not None:
            self.ready.synchronize()
        return [] if self.logprobs is None else self.logprobs.tolist()


def choose(
    logits: torch.Tensor,
    banned: list[set[int]],
    forced: list[int | None],
    kernels: bool = False,
) -> Chosen:
    """Greedy per row (logits: (B, V)), with row b's ``banned`` ids excluded and its
    ``forced`` id, if any, taking the place of the choice. Nothing here waits for the GPU.
    ``kernels``: in choice_kernels' two launches (with the runner's own kernels: a dozen
    launches fewer a step from the host), else in torch's ops."""
    device = logits.device
    if kernels:
        both = _choose_in_kernels(logits, banned, forced)
    else:
        both = _choose_in_torch(logits, banned, forced)
    chosen = both[1]
    logprobs = chosen_logprobs(logits, chosen)
    if device.type != "cuda":
        return Chosen(chosen, both, None, logprobs)
    picks = torch.empty(both.shape, dtype=both.dtype, pin_memory=True)
    picks.copy_(both, non_blocking=True)
    scores = torch.empty(logprobs.shape, dtype=logprobs.dtype, pin_memory=True)
    scores.copy_(logprobs, non_blocking=True)
    ready = torch.cuda.Event()
    ready.record()
    return Chosen(chosen, picks, ready, scores)


def chosen_logprobs(logits: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """(B,) float32: log softmax(logits)[b, chosen[b]], on the logits' device. In float32:
    a bf16 log-sum-exp near 30 is rounded to 1/8, which would read p = 0.97 as 1.0 (a (B, V)
    float32 copy: ~66 MB at 128 rows, ~0.5% of a step)."""
    rows = logits.float()
    picked = rows.gather(1, chosen[:, None].to(torch.long))[:, 0]
    return picked - torch.logsumexp(rows, dim=-1)


def _choose_in_kernels(
    logits: torch.Tensor, banned: list[set[int]], forced: list[int | None]
) -> torch.Tensor:
    from ocr_worker.engines.unlimited_ocr.kernels.choice import choose_on_device

    width = max((len(ids) for ids in banned), default=0)
    table = [
        [NO_TOKEN if imposed is None else imposed, *sorted(ids)] + [NO_TOKEN] * (width - len(ids))
        for ids, imposed in zip(banned, forced, strict=True)
    ]
    return choose_on_device(logits, on_device(table, logits.device, torch.int32))


def _choose_in_torch(
    logits: torch.Tensor, banned: list[set[int]], forced: list[int | None]
) -> torch.Tensor:
    device = logits.device
    wanted = greedy(logits)
    chosen = wanted
    rows = [b for b, ids in enumerate(banned) for _ in ids]
    if rows:
        ids = [i for row in banned for i in row]
        masked = logits.clone()
        masked[on_device(rows, device), on_device(ids, device)] = float("-inf")
        chosen = greedy(masked)
    if any(f is not None for f in forced):
        imposed = on_device([NO_TOKEN if f is None else f for f in forced], device)
        chosen = torch.where(imposed != NO_TOKEN, imposed, chosen)
    return torch.stack([wanted, chosen])


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """``logits.argmax(-1)`` (the first of equal maxima), in two passes: on the GPU, torch's
    reduction of one 129k-wide row runs on a few blocks (27 µs a call on the H200, two calls a
    step); the maxima of 128 chunks, then the first chunk holding the largest, take ~10."""
    rows, vocab = logits.shape
    chunks = 128
    if vocab % chunks:
        return logits.argmax(-1)
    values, index = logits.view(rows, chunks, vocab // chunks).max(-1)  # (B, chunks)
    best = values.argmax(-1)
    return best * (vocab // chunks) + index.gather(1, best[:, None])[:, 0]


def on_device(
    values: list[int] | list[list[int]], device: torch.device, dtype: torch.dtype = torch.long
) -> torch.Tensor:
    """A small list (or table) of ids on the device, through pinned memory so the copy does
    not block."""
    if device.type != "cuda":
        return torch.tensor(values, dtype=dtype)
    return pinned(values, dtype).to(device, non_blocking=True)


def pinned(values: list[int] | list[list[int]], dtype: torch.dtype = torch.long) -> torch.Tensor:
    """``values`` in pinned host memory, for a copy to the device that does not block (torch's
    pinned allocator keeps the block until the copy is done)."""
    return torch.tensor(values, dtype=dtype).pin_memory()
