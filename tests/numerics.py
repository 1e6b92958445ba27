"""Tolerances for two fp32 computations of the same sums that may add their terms in different
orders: a kernel in Triton's interpreter against the torch ops it replaces, a batched call
against an unbatched one, one tile layout against another.

Each processor's BLAS and numpy pick their own summation order and vector width (OpenBLAS's
Haswell, Zen and SkylakeX kernels; numpy's AVX2 or AVX-512 loops), so two such results agree
only to the rounding of a sum, never bit for bit. Rounding a sum of ``length`` terms in two
orders leaves at most about ``length`` units of fp32's epsilon at the terms' magnitude (the
classic bound on recursive summation), which the largest value of the result stands in for.
A value written to the wrong row, a missed term or a wrong mask is off by the values' own
magnitude, orders of magnitude above this: the tolerance still catches every such bug.
"""

from __future__ import annotations

import torch

FP32_EPS = torch.finfo(torch.float32).eps


def summation_atol(values: torch.Tensor, *, length: int, ulps: float = 1.0) -> float:
    """The gap two fp32 summation orders of ``length`` terms may leave between results of the
    size of ``values`` (``ulps`` epsilons a term, at the largest |value|)."""
    return ulps * FP32_EPS * length * float(values.detach().abs().max())


def assert_same_sums(
    actual: torch.Tensor, expected: torch.Tensor, *, length: int, ulps: float = 1.0
) -> None:
    """``actual`` equals ``expected`` up to the rounding of a different summation order over
    ``length`` terms (no relative part: values near zero carry the same absolute rounding as
    the largest ones, since they are sums of terms of that size)."""
    atol = summation_atol(expected, length=length, ulps=ulps)
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol)
