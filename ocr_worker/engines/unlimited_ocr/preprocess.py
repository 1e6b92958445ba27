"""Page images to the vision tower's input: base mode, one square view per page.

Aspect-preserving resize into ``size`` x ``size``, padded with grey (127, 127, 127), normalised
with mean 0.5 and std 0.5 (ENGINE_NOTES.md). 1024 for the real model: 273 tokens a page.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image


def page_tensor(pixels: np.ndarray, size: int) -> torch.Tensor:
    """(H, W, 3) uint8 -> (3, size, size) float32 in [-1, 1]."""
    image = Image.fromarray(pixels)
    scale = size / max(image.size)
    resized = image.resize(
        (max(1, round(image.width * scale)), max(1, round(image.height * scale))),
        Image.Resampling.BICUBIC,
    )
    canvas = Image.new("RGB", (size, size), (127, 127, 127))
    canvas.paste(resized, ((size - resized.width) // 2, (size - resized.height) // 2))
    array = torch.from_numpy(np.asarray(canvas, dtype=np.float32) / 255.0)  # (S, S, 3)
    return ((array - 0.5) / 0.5).permute(2, 0, 1).contiguous()
