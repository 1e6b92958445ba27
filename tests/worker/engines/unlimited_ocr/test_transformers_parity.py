"""The GPU engine's greedy tokens equal transformers' own ``generate`` on the tiny checkpoint.

The reference is transformers end to end: its ``UnlimitedOcrProcessor`` and
``UnlimitedOcrImageProcessor`` build ``input_ids`` and pixels from the page images as the
documented calls do (several pages: ``"<image>" * pages + "Multi page parsing."`` with
``crop_to_patches=False``; one page: ``"<image>document parsing."``, gundam by default), and
``model.generate`` decodes them greedily with the official n-gram ban (35 over the last 1024 ids
for several pages, 128 for one). Our side is the engine's own path from the same page images:
``_request`` (its preprocessing, vision tower, BOS and prompt), then ``loop.decode`` (block pool,
R-SWA ring, n-gram guard). EOS is suppressed on both sides (``min_new_tokens``, ``ignore_eos``)
so the lengths match, and page framing and budgets are switched off on ours: they are our
additions, not the model's. 48 steps wrap the tiny model's 8-slot ring six times. The tiny
checkpoint's vision and decoder weights are live (tiny_model.py), so every page and prompt gives
its own tokens (checked first).

The image processor needs torchvision, whose registry wheels are CUDA builds: it runs in a child
process with ``.ci-state/torchvision`` on its path (see ``_import_torchvision``), so nothing of it
reaches the rest of the suite. ``python -m`` this module is that child.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from ocr_worker.engines.unlimited_ocr.step.decode_rule import R_SWA

REPO = Path(__file__).resolve().parents[4]
TORCHVISION_DIR = REPO / ".ci-state" / "torchvision"  # pip install --no-deps --target
STEPS = 48  # the ring (8 slots) wraps 6 times
TILE = 96  # tiny gundam tiles: 96 // 16 = 6 SAM patches -> 2 x 2 queries, as 640 gives 10 x 10
BASE_PAD_LIMIT = 0  # see _processor_main
BOS, PAD = 0, 2
_torchvision_ops: list[Any] = []  # keeps the child's op declarations alive


# -- pages ---------------------------------------------------------------------------------------


def render_page(seed: int, height: int, width: int) -> np.ndarray:
    """A page of dark 'text lines', a title bar and a ruled table, placed by ``seed``."""
    rng = np.random.default_rng(seed)
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    margin = width // 10
    draw.rectangle((margin, margin, width - margin, margin + height // 14), fill=(20, 20, 20))
    y = margin + height // 8
    while y < height * 0.6:
        right = int(rng.integers(width // 2, width - margin))
        draw.text((margin, y), f"Line {y} of page {seed}: revenue grew", fill=(0, 0, 0))
        draw.line((margin, y + 12, right, y + 12), fill=(60, 60, 60), width=2)
        y += int(rng.integers(16, 30))
    top, rows, columns = int(height * 0.65), int(rng.integers(2, 5)), int(rng.integers(2, 4))
    cell_h, cell_w = (height - margin - top) // rows, (width - 2 * margin) // columns
    for r in range(rows + 1):
        draw.line((margin, top + r * cell_h, margin + columns * cell_w, top + r * cell_h), fill=0)
    for c in range(columns + 1):
        draw.line((margin + c * cell_w, top, margin + c * cell_w, top + rows * cell_h), fill=0)
    return np.asarray(image)


PAGES = [render_page(1, 330, 250), render_page(2, 300, 220), render_page(3, 240, 320)]
CASES = {  # name -> (pages, prompt, crop_to_patches)
    "one_page_base": ([0], "document parsing.", False),
    "three_pages": ([0, 1, 2], "Multi page parsing.", False),
    "one_page_gundam": ([0], "document parsing.", True),
    "other_page_base": ([1], "document parsing.", False),
}


# -- the reference's inputs, built by transformers' processor in a child process -----------------


def processor_inputs(
    checkpoint: Path,
    pages: list[np.ndarray],
    cases: dict[str, tuple[list[int], str, bool]],
    *,
    image_size: int,
    tile_size: int,
    workdir: Path,
) -> dict[str, dict[str, Any]]:
    """Runs ``_processor_main`` in a child: case name -> the processor's output tensors."""
    for index, pixels in enumerate(pages):
        np.save(workdir / f"page{index}.npy", pixels)
    spec = {
        "checkpoint": str(checkpoint),
        "pages": len(pages),
        "cases": cases,
        "image_size": image_size,
        "tile_size": tile_size,
    }
    (workdir / "spec.json").write_text(json.dumps(spec))
    paths = [str(REPO), str(TORCHVISION_DIR), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.worker.engines.unlimited_ocr.test_transformers_parity",
            str(workdir),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded: dict[str, dict[str, Any]] = torch.load(workdir / "inputs.pt", weights_only=False)
    return loaded


def _processor_main(workdir: Path) -> None:
    spec = json.loads((workdir / "spec.json").read_text())
    _import_torchvision()
    from transformers import PreTrainedTokenizerFast
    from transformers.models.unlimited_ocr import UnlimitedOcrProcessor
    from transformers.models.unlimited_ocr.image_processing_unlimited_ocr import (
        UnlimitedOcrImageProcessor,
    )

    # As the official tokenizer (and the official remote code) do: BOS first, nothing after.
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(Path(spec["checkpoint"]) / "tokenizer.json"),
        bos_token="<｜begin▁of▁sentence｜>",
        eos_token="<｜end▁of▁sentence｜>",
        pad_token="<｜▁pad▁｜>",
        add_bos_token=True,
        add_eos_token=False,
    )
    images = [Image.fromarray(np.load(workdir / f"page{i}.npy")) for i in range(spec["pages"])]
    out = {}
    for name, (indices, prompt, crop) in spec["cases"].items():
        size = spec["image_size"]
        processor = UnlimitedOcrProcessor(
            image_processor=UnlimitedOcrImageProcessor(
                size={"height": size, "width": size},
                tile_size=spec["tile_size"],
                # Base mode pads each page to a square when its view is larger than this; the
                # real model's 1024 always is (> 640). The tiny view (128) would otherwise be
                # stretched without padding, a path the real model never takes.
                maximum_pad_value=BASE_PAD_LIMIT,
            ),
            tokenizer=tokenizer,
        )
        inputs = processor(
            images=[images[i] for i in indices],
            text="<image>" * len(indices) + prompt,
            crop_to_patches=crop,
            return_tensors="pt",
        )
        out[name] = dict(inputs)
    torch.save(out, workdir / "inputs.pt")


def _import_torchvision() -> None:
    """torchvision from the venv or ``.ci-state/torchvision``. The registry only has CUDA
    builds: with a CPU torch their C++ ops library does not load, and the import then fails
    registering fakes for two of those ops (``nms``, ``qnms``). The image transforms use none
    of them; declaring the two lets the package import. Only ever done in this child."""
    try:
        import torchvision  # noqa: F401
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
        for name in [n for n in sys.modules if n.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        library = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _torchvision_ops.append(library)
        import torchvision  # noqa: F401, F811


# -- the two sides -------------------------------------------------------------------------------


def reference_tokens(
    model: Any, inputs: dict[str, Any], steps: int, pages: int, *, with_logits: bool = False
) -> Any:
    """transformers' generate: greedy, the official n-gram ban, EOS suppressed for ``steps``;
    with ``with_logits``, also its raw logits at every step."""
    device = next(model.parameters()).device
    moved = {
        key: value.to(device, model.dtype)
        if key.startswith("pixel_values")
        else value.to(device)
        if isinstance(value, torch.Tensor)
        else value
        for key, value in inputs.items()
    }
    config = copy.deepcopy(model.generation_config)
    config.update(
        do_sample=False,
        max_new_tokens=steps,
        min_new_tokens=steps,
        no_repeat_ngram_size=35,
        pad_token_id=PAD,
        output_logits=with_logits,
        return_dict_in_generate=True,
    )
    # Read by UnlimitedOcrGenerationMixin from the config: transformers 5.24 refuses it as a
    # keyword of generate (its docs' example passes it so, and raises).
    config.no_repeat_ngram_window_size = 1024 if pages > 1 else 128
    with torch.no_grad():
        output = model.generate(**moved, generation_config=config)
    tokens = output.sequences[0, inputs["input_ids"].shape[1] :].tolist()
    if with_logits:
        return tokens, [step[0].float() for step in output.logits]
    return tokens


def engine_request(engine: Any, pages: list[np.ndarray], steps: int) -> Any:
    """The engine's own request for one group of ``pages``, minus our page framing and budget:
    one unframed section, no budget, EOS refused, nothing kept for a next group."""
    from ocr_worker.engines.base import PageGroupInput, PageImage

    group = PageGroupInput(
        "parity", 0, [], [PageImage(n + 1, p) for n, p in enumerate(pages)], True
    )
    request = engine._request(group)
    guard = dataclasses.replace(request.guard, num_pages=1, framed=False, page_budget=10**9)
    return dataclasses.replace(
        request, guard=guard, ignore_eos=True, max_new_tokens=steps, keep_pages=()
    )


def engine_tokens(engine: Any, request: Any) -> list[int]:
    finished = engine.loop.decode(request)
    assert not finished.kept
    return list(finished.sequence.generated)


def prefix_rows(request: Any) -> torch.Tensor:
    return torch.cat([segment.embeds for segment in request.new])  # (prefix, hidden)


def merged_embeds(model: Any, inputs: dict[str, Any]) -> torch.Tensor:
    """transformers' own prefix: token embeddings with the image features scattered in."""
    base = model.model
    with torch.no_grad():
        embeds = base.get_input_embeddings()(inputs["input_ids"])
        local = inputs.get("pixel_values_local")
        features = base.get_image_features(
            pixel_values=inputs["pixel_values"].to(model.dtype),
            pixel_values_local=None if local is None else local.to(model.dtype),
            num_local_patches=inputs.get("num_local_patches"),
            patches_grid=inputs.get("patches_grid"),
        ).pooler_output
        mask = base.get_placeholder_mask(inputs["input_ids"], embeds, torch.cat(features))
        return embeds.masked_scatter(mask, torch.cat(features))[0]  # (prefix, hidden)


# -- fixtures and tests --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.worker.engines.unlimited_ocr.tiny_model import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-parity"))


@pytest.fixture(scope="module")
def inputs(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return processor_inputs(
        checkpoint,
        PAGES,
        CASES,
        image_size=128,
        tile_size=TILE,
        workdir=tmp_path_factory.mktemp("processor"),
    )


@pytest.fixture(scope="module")
def reference(checkpoint: Path) -> Any:
    """transformers' own model from the checkpoint, loaded apart from the engine's."""
    from transformers.models.unlimited_ocr import UnlimitedOcrForConditionalGeneration

    from ocr_worker.engines.unlimited_ocr.model.checkpoint import read_config

    return UnlimitedOcrForConditionalGeneration.from_pretrained(
        str(checkpoint), config=read_config(checkpoint), dtype=torch.float32
    ).eval()


@pytest.fixture(scope="module")
def engines(checkpoint: Path) -> dict[str, Any]:
    """The engine as shipped (R-SWA, one page in gundam), and one with gundam off."""
    from ocr_worker.engines.unlimited_ocr.runtime.engine import UnlimitedOcrEngine
    from uocr_core.settings import load_settings

    def build(**options: Any) -> UnlimitedOcrEngine:
        settings = load_settings(
            engine="unlimited_ocr",
            model_path=checkpoint,
            visual_cache_workspace_gb=0.002,  # the KV pool: 0.002 GB is ~1,300 tiny rows
            unlimited_ocr={"tile_size": TILE, **options},
        )
        return UnlimitedOcrEngine.from_settings(settings)

    return {"default": build(), "base": build(gundam=False)}


def test_the_vision_path_is_live(inputs: dict[str, Any], reference: Any) -> None:
    """Different pages give clearly different image rows and tokens: an image-path bug (a
    wrong page, a constant image) shows up in the parity tests below."""
    rows = [
        reference.model.get_image_features(pixel_values=inputs[name]["pixel_values"])
        .pooler_output[0]
        .detach()
        for name in ("one_page_base", "other_page_base")
    ]
    assert (rows[0] - rows[1]).norm() > 0.3 * rows[0].norm()
    first, second = (
        reference_tokens(reference, inputs[name], 16, 1)
        for name in ("one_page_base", "other_page_base")
    )
    assert first != second


@pytest.mark.parametrize("case", ["one_page_base", "three_pages", "one_page_gundam"])
def test_the_prefix_is_the_processors(
    case: str, inputs: dict[str, Any], reference: Any, engines: dict[str, Any]
) -> None:
    """Our prefix row by row equals transformers' merged embeddings for the processor's
    input_ids: ``[BOS] + every page's image tokens + prompt``, no chat markup, same count."""
    indices, prompt, crop = CASES[case]
    ids = inputs[case]["input_ids"][0].tolist()
    image_id = reference.config.image_token_id
    prompt_ids = engines["default"].tokenizer.encode(prompt, add_special_tokens=False).ids
    images = len(ids) - 1 - len(prompt_ids)
    assert ids == [BOS] + [image_id] * images + prompt_ids
    _, request = ours_for(engines, indices, crop)
    ours, theirs = prefix_rows(request), merged_embeds(reference, inputs[case])
    assert ours.shape == theirs.shape
    # Pixels differ by at most a grey level or so (PIL vs torchvision bicubic).
    assert (ours - theirs).abs().max() <= 0.05 * theirs.abs().max()


@pytest.mark.parametrize("case", ["one_page_base", "three_pages", "one_page_gundam"])
def test_greedy_tokens_equal_generate(
    case: str, inputs: dict[str, Any], reference: Any, engines: dict[str, Any]
) -> None:
    assert engines["default"].loop.scheduler.runner.rule is R_SWA  # R-SWA, as v1 was trained
    indices, _, crop = CASES[case]
    expected = reference_tokens(reference, inputs[case], STEPS, len(indices))
    got = engine_tokens(*ours_for(engines, indices, crop))
    assert len(set(expected)) > 4  # not a degenerate output that any bug would reproduce
    assert got == expected


def ours_for(engines: dict[str, Any], indices: list[int], crop: bool) -> tuple[Any, Any]:
    """(engine, request): one page on its own runs gundam by default; its base-mode twin is
    the engine with gundam off."""
    engine = engines["base" if len(indices) == 1 and not crop else "default"]
    return engine, engine_request(engine, [PAGES[i] for i in indices], STEPS)


if __name__ == "__main__":
    _processor_main(Path(sys.argv[1]))
