"""Page images to the vision tower's input, in the model's two modes (ENGINE_NOTES.md).

Base mode (several pages): one square view per page, an aspect-preserving resize into
``size`` x ``size`` padded with grey (127, 127, 127); 1024 for the real model, 273 tokens.
Gundam mode (one page on its own, the official single-image path): the same global view plus
the page cut into 640-pixel tiles, 2 to 32 of them, for small print. Both normalised with
mean 0.5 and std 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    return _normalise(np.asarray(canvas, dtype=np.float32))  # (3, S, S)


@dataclass(frozen=True)
class GundamViews:
    """One page the way the official single-image path sees it: a global view in base mode,
    plus the page cut into ``columns`` x ``rows`` square tiles (row-major)."""

    global_view: torch.Tensor  # (3, size, size)
    tiles: torch.Tensor | None  # (columns * rows, 3, tile, tile), None for a small image
    columns: int
    rows: int


def gundam_views(
    pixels: np.ndarray, size: int, tile: int, *, min_tiles: int = 2, max_tiles: int = 32
) -> GundamViews:
    """(H, W, 3) uint8 -> the global view and the tiles. An image no larger than a tile gets
    no tiles; otherwise it is stretched onto the grid whose shape is closest to its own."""
    global_view = page_tensor(pixels, size)
    height, width = pixels.shape[:2]
    if max(height, width) <= tile:
        return GundamViews(global_view, None, 1, 1)
    columns, rows = tile_grid(width, height, tile, min_tiles, max_tiles)
    canvas = Image.fromarray(pixels).resize((tile * columns, tile * rows), Image.Resampling.BICUBIC)
    array = _normalise(np.asarray(canvas, dtype=np.float32))  # (3, rows*tile, columns*tile)
    tiles = [
        array[:, r * tile : (r + 1) * tile, c * tile : (c + 1) * tile]
        for r in range(rows)
        for c in range(columns)
    ]
    return GundamViews(global_view, torch.stack(tiles), columns, rows)


def tile_grid(
    width: int, height: int, tile: int, min_tiles: int, max_tiles: int
) -> tuple[int, int]:
    """(columns, rows) whose aspect ratio is nearest the image's. Among equally near grids the
    larger one wins while the image still has more than half its area in pixels."""
    grids = sorted(
        (
            (c, r)
            for c in range(1, max_tiles + 1)
            for r in range(1, max_tiles + 1)
            if min_tiles <= c * r <= max_tiles
        ),
        key=lambda grid: grid[0] * grid[1],
    )
    aspect, best, best_gap = width / height, (1, 1), float("inf")
    for columns, rows in grids:
        gap = abs(aspect - columns / rows)
        if gap < best_gap or (
            gap == best_gap and width * height > 0.5 * tile * tile * columns * rows
        ):
            best, best_gap = (columns, rows), gap
    return best


def _normalise(array: np.ndarray) -> torch.Tensor:
    """(H, W, 3) float 0-255 -> (3, H, W) in [-1, 1] (mean 0.5, std 0.5)."""
    scaled = torch.from_numpy(array / 255.0)
    return ((scaled - 0.5) / 0.5).permute(2, 0, 1).contiguous().float()
