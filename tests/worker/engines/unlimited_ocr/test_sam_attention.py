"""SAM's global attention with the relative positions folded into q·k equals transformers'
own (the bias built in memory), on live weights: the page features the decoder reads."""

from __future__ import annotations

import pytest
import torch
from transformers.models.unlimited_ocr.modeling_unlimited_ocr import (
    UnlimitedOcrSamVisionSdpaAttention,
)

from bench.engine.setup import build_model
from ocr_worker.engines.unlimited_ocr.model.sam_attention import use_fused_rel_pos
from tests.numerics import assert_same_sums


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    model = build_model(True, torch.device("cpu"), torch.float32)  # the tiny config, live weights
    generator = torch.Generator().manual_seed(1)
    for name, param in model.named_parameters():
        if "rel_pos" in name:  # a trained model's are far from zero
            param.data.normal_(0, 0.5, generator=generator)
    return model


def _global_attentions(model):  # type: ignore[no-untyped-def]
    return [m.attn for m in model.modules() if getattr(m, "window_size", None) == 0]


def test_page_features_are_the_same_with_the_bias_folded_into_q_dot_k(model) -> None:  # type: ignore[no-untyped-def]
    pages = torch.randn(3, 3, 128, 128, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = model.model.get_image_features(pixel_values=pages).pooler_output
        assert use_fused_rel_pos(model) == len(_global_attentions(model)) >= 1
        after = model.model.get_image_features(pixel_values=pages).pooler_output
    for ours, theirs in zip(after, before, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(before[0], before[1])  # live: different pages, different features


@pytest.mark.parametrize("grid", [(8, 8), (5, 7)])  # the trained grid, and an interpolated one
def test_one_global_attention_equals_transformers_on_any_grid(model, grid) -> None:  # type: ignore[no-untyped-def]
    attn = _global_attentions(model)[0]
    use_fused_rel_pos(model)
    hidden = torch.randn(2, *grid, attn.qkv.in_features, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ours, _ = attn(hidden)
        theirs, _ = UnlimitedOcrSamVisionSdpaAttention.forward(attn, hidden)
        without, _ = UnlimitedOcrSamVisionSdpaAttention.forward(_without_rel_pos(attn), hidden)
    # the bias folded into q·k sums in another order: a score's channels, then every key's row
    assert_same_sums(ours, theirs, length=hidden.shape[-1] + grid[0] * grid[1])
    assert (theirs - without).abs().max() > 100 * (ours - theirs).abs().max()  # the term matters


def _without_rel_pos(attn):  # type: ignore[no-untyped-def]
    import copy

    plain = copy.deepcopy(attn)
    plain.rel_pos_h.data.zero_()
    plain.rel_pos_w.data.zero_()
    return plain
