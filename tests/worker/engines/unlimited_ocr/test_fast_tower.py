"""The vision tower as the engine runs it (fast_tower.py: SAM's windowed and global attention
folded, the patch embedding as a GEMM, CLIP's q, k, v in one GEMM, the features laid out for the
whole batch) gives transformers' page features, on the tiny model with live weights.

The tolerance is relative to the features' size: every change computes the model's sums in
another order (a GEMM for a convolution, a dot product over longer vectors for a product plus a
bias), so the features agree to fp32 rounding, never bit for bit (~1e-6 of the largest feature
seen here); a missing or misplaced term is off by orders of magnitude more, which the controls
check."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers.models.unlimited_ocr.modeling_unlimited_ocr import (
    UnlimitedOcrAttention,
    UnlimitedOcrSamVisionSdpaAttention,
)

from bench.engine.setup import build_model
from ocr_worker.engines.unlimited_ocr.model.fast_tower import encode_pages, use_fast_tower
from tests.numerics import assert_same_sums
from tests.worker.engines.unlimited_ocr.tiny_model import _make_vision_live

RELATIVE = 2e-5  # of the largest feature: ~170 fp32 epsilons; seen ~1e-6


@pytest.fixture(scope="module")
def theirs():  # type: ignore[no-untyped-def]
    """The tiny model with live vision weights and a trained model's size of relative
    positions (transformers initialises them at zero, which would hide a wrong term)."""
    model = build_model(True, torch.device("cpu"), torch.float32)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        _make_vision_live(model, generator)
        for name, param in model.named_parameters():
            if "rel_pos" in name:
                param.normal_(0, 0.5, generator=generator)
    return model


@pytest.fixture(scope="module")
def ours(theirs):  # type: ignore[no-untyped-def]
    model = copy.deepcopy(theirs)
    changed = use_fast_tower(model)
    sam = theirs.config.vision_config.sam_config
    assert changed == {
        "sam_global": len(sam.global_attn_indexes),
        "sam_windowed": sam.num_hidden_layers - len(sam.global_attn_indexes),
        "patch_embedding": 1,
        "clip_attention": theirs.config.vision_config.encoder_config.num_hidden_layers,
    }
    return model


def _pages(size: int, count: int = 3) -> torch.Tensor:
    return torch.randn(count, 3, size, size, generator=torch.Generator().manual_seed(size))


def _features(theirs, ours, pages):  # type: ignore[no-untyped-def]
    with torch.no_grad():
        expected = torch.stack(theirs.model.get_image_features(pixel_values=pages).pooler_output)
        return encode_pages(ours, pages), expected


def _assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    atol = RELATIVE * float(expected.abs().max())
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol)


# 128: the tiny model's 8 x 8 grid, windows of 4 fit; 112: a 7 x 7 grid, its windows padded
@pytest.mark.parametrize("size", [128, 112])
def test_page_features_equal_transformers(theirs, ours, size: int) -> None:  # type: ignore[no-untyped-def]
    actual, expected = _features(theirs, ours, _pages(size))
    assert actual.shape == expected.shape  # rows + newlines, then the view separator
    _assert_close(actual, expected)
    assert not torch.allclose(expected[0], expected[1])  # live: each page its own features


def test_a_windowed_layer_without_its_relative_positions_fails_the_tolerance(theirs, ours) -> None:  # type: ignore[no-untyped-def]
    """The control: the windowed term matters far beyond the tolerance, so a fold that lost
    or misplaced it could not pass the test above."""
    broken = copy.deepcopy(ours)
    for layer in broken.model.vision_tower.sam_encoder.layers:
        if layer.window_size:
            layer.attn.rel_pos_h.data.zero_()
            layer.attn.rel_pos_w.data.zero_()
    actual, expected = _features(theirs, broken, _pages(112))
    atol = RELATIVE * float(expected.abs().max())
    assert (actual - expected).abs().max() > 100 * atol


@pytest.mark.parametrize("windows", [1, 5])
def test_one_windowed_attention_equals_transformers(ours, windows: int) -> None:  # type: ignore[no-untyped-def]
    layer = next(m for m in ours.model.vision_tower.sam_encoder.layers if m.window_size)
    attn, size = layer.attn, layer.window_size
    hidden = torch.randn(windows, size, size, attn.qkv.in_features)
    with torch.no_grad():
        actual, _ = attn(hidden)
        expected, _ = UnlimitedOcrSamVisionSdpaAttention.forward(attn, hidden)
    # a score now sums its channels, then every key's row and column: a longer sum
    assert_same_sums(actual, expected, length=hidden.shape[-1] + 2 * size * size)


def test_clip_attention_in_one_qkv_gemm_equals_transformers(theirs, ours) -> None:  # type: ignore[no-untyped-def]
    mine = ours.model.vision_tower.vision_encoder.encoder.layers[0].self_attn
    original = theirs.model.vision_tower.vision_encoder.encoder.layers[0].self_attn
    hidden = torch.randn(2, 5, mine.embed_dim, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        actual, _ = mine(hidden)
        expected, _ = UnlimitedOcrAttention.forward(original, hidden)
    assert_same_sums(actual, expected, length=2 * mine.embed_dim)


def test_clip_keeps_one_copy_of_its_weights_and_its_state_dict(theirs, ours) -> None:  # type: ignore[no-untyped-def]
    attn = ours.model.vision_tower.vision_encoder.encoder.layers[1].self_attn
    start = attn.qkv_weight.data_ptr()
    width = attn.q_proj.weight.numel() * attn.qkv_weight.element_size()
    pointers = [p.weight.data_ptr() for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
    assert pointers == [start, start + width, start + 2 * width]  # views, no second copy
    before, after = theirs.state_dict(), ours.state_dict()
    assert before.keys() == after.keys()  # the fused tensors are not saved
    for key, value in before.items():
        assert torch.equal(after[key], value), key


@pytest.mark.parametrize("size", [128, 120])  # 120: the convolution drops the last 8 pixels
def test_the_patch_embedding_as_a_gemm_equals_the_convolution(ours, size: int) -> None:  # type: ignore[no-untyped-def]
    embed = ours.model.vision_tower.sam_encoder.patch_embed
    pages = _pages(size, count=2)
    with torch.no_grad():
        actual = embed(pages)
        expected = embed.projection(pages).permute(0, 2, 3, 1)
    assert_same_sums(actual, expected, length=embed.projection.weight[0].numel())
