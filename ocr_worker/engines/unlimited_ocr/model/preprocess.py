"""Page images to the vision tower's input, in the model's two modes (docs/model.md, "Page modes:
base and gundam").

Base mode (several pages): one square view per page, an aspect-preserving resize into
``size`` x ``size`` padded with grey (127, 127, 127); 1024 for the real model, 273 tokens.
Gundam mode (one page on its own, the official single-image path): the same global view plus
the page cut into 640-pixel tiles, 2 to 32 of them, for small print. Both normalised with
mean 0.5 and std 0.5.

Resizing is torch's antialiased bicubic on the page's own device, as transformers' image
processor does it (torchvision on uint8 tensors): on the GPU it costs a fraction of a
millisecond where PIL took ~100 ms of CPU per A4 page at 200 dpi (bench/engine/step_profile.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

GREY = 127.0  # the official padding colour


def page_tensor(pixels: np.ndarray, size: int, device: torch.device | None = None) -> torch.Tensor:
    """(H, W, 3) uint8 -> (3, size, size) float32 in [-1, 1], on ``device``."""
    image = _upload(pixels, device)
    height, width = image.shape[1:]
    scale = size / max(height, width)
    new_height, new_width = max(1, round(height * scale)), max(1, round(width * scale))
    canvas = torch.full((3, size, size), GREY, device=image.device)
    top, left = (size - new_height) // 2, (size - new_width) // 2
    canvas[:, top : top + new_height, left : left + new_width] = _resize(
        image, new_height, new_width
    )
    return _normalise(canvas)


@dataclass(frozen=True)
class GundamViews:
    """One page the way the official single-image path sees it: a global view in base mode,
    plus the page cut into ``columns`` x ``rows`` square tiles (row-major)."""

    global_view: torch.Tensor  # (3, size, size)
    tiles: torch.Tensor | None  # (columns * rows, 3, tile, tile), None for a small image
    columns: int
    rows: int


def gundam_views(
    pixels: np.ndarray,
    size: int,
    tile: int,
    *,
    min_tiles: int = 2,
    max_tiles: int = 32,
    device: torch.device | None = None,
) -> GundamViews:
    """(H, W, 3) uint8 -> the global view and the tiles. An image no larger than a tile gets
    no tiles; otherwise it is stretched onto the grid whose shape is closest to its own."""
    global_view = page_tensor(pixels, size, device)
    height, width = pixels.shape[:2]
    if max(height, width) <= tile:
        return GundamViews(global_view, None, 1, 1)
    columns, rows = tile_grid(width, height, tile, min_tiles, max_tiles)
    stretched = _resize(_upload(pixels, device), tile * rows, tile * columns)
    array = _normalise(stretched)  # (3, rows*tile, columns*tile)
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


def _upload(pixels: np.ndarray, device: torch.device | None) -> torch.Tensor:
    """(H, W, 3) uint8 -> (3, H, W) float32 0-255 on ``device``: the bytes travel, not floats."""
    array = np.ascontiguousarray(pixels)
    if not array.flags.writeable:  # torch warns on read-only memory, though we only read it
        array = array.copy()
    return torch.from_numpy(array).to(device).permute(2, 0, 1).float()


def _resize(image: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Antialiased bicubic, rounded to whole levels as a uint8 image would be."""
    resized = F.interpolate(
        image[None], size=(height, width), mode="bicubic", antialias=True, align_corners=False
    )[0]
    return resized.round_().clamp_(0, 255)


def _normalise(image: torch.Tensor) -> torch.Tensor:
    """0-255 -> [-1, 1] (mean 0.5, std 0.5)."""
    return (image / 255.0 - 0.5) / 0.5
