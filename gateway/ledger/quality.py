"""The quality guard: the same workflow and seed run on two configurations should give the
same picture. Compares output images (identical size, PSNR against the baseline's, the share
of black pixels) and calls an image broken when it is nearly all black or one flat colour:
what a VAE run in too low a precision leaves (NaN pixels, which ComfyUI writes as 0, so the
black share counts them), the first document's warning about `--fp16-vae` on SDXL.

Pillow only (already a dependency of the gateway).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from PIL import Image, ImageChops, ImageStat

BLACK_LEVEL = 8
"""A pixel whose every channel is below this is black."""
BROKEN_BLACK_SHARE = 0.9
FLAT_STDDEV = 1.0
"""An image whose channels vary less than this (0-255) is one flat colour."""
SIMILAR_PSNR_DB = 30.0
"""Below this against the baseline's image the pictures differ visibly."""


def facts(png: bytes) -> dict[str, Any]:
    """Size, black share and flatness of one image."""
    with Image.open(io.BytesIO(png)) as image:
        rgb = image.convert("RGB")
    darkest = _max_channel(rgb)
    histogram = darkest.histogram()
    total = rgb.width * rgb.height
    black = sum(histogram[:BLACK_LEVEL]) / total if total else 1.0
    flat = max(ImageStat.Stat(rgb).stddev) < FLAT_STDDEV
    broken = black >= BROKEN_BLACK_SHARE or flat
    return {
        "size": [rgb.width, rgb.height],
        "black_share": round(black, 4),
        "flat": flat,
        "broken": broken,
    }


def _max_channel(rgb: Image.Image) -> Image.Image:
    """Each pixel's brightest channel (a pixel is black when all its channels are dark)."""
    red, green, blue = rgb.split()
    return ImageChops.lighter(ImageChops.lighter(red, green), blue)


def psnr_db(a: bytes, b: bytes) -> float | None:
    """PSNR of b against a in dB (inf when identical; None when their sizes differ)."""
    with Image.open(io.BytesIO(a)) as first, Image.open(io.BytesIO(b)) as second:
        x, y = first.convert("RGB"), second.convert("RGB")
    if x.size != y.size:
        return None
    squares = ImageStat.Stat(ImageChops.difference(x, y)).sum2
    mse = sum(squares) / (3 * x.width * x.height)
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def judge(baseline: Sequence[bytes], candidate: Sequence[bytes]) -> dict[str, Any]:
    """The candidate configuration's images against the baseline's for the same workflow and
    seed: `sound` unless an image is broken, missing, or of another size."""
    if not candidate:
        return {"sound": False, "reason": "no image", "images": []}
    images = []
    for index, png in enumerate(candidate):
        found = facts(png)
        reference = baseline[index] if index < len(baseline) else None
        found["psnr_db"] = None if reference is None else _rounded(psnr_db(reference, png))
        found["same_size"] = reference is not None and facts(reference)["size"] == found["size"]
        images.append(found)
    return {
        "sound": not _problems(images),
        "reason": "; ".join(_problems(images)) or "ok",
        "images": images,
    }


def _problems(images: Sequence[dict[str, Any]]) -> list[str]:
    found = []
    if any(i["broken"] and i["black_share"] >= BROKEN_BLACK_SHARE for i in images):
        found.append("black image")
    elif any(i["broken"] for i in images):
        found.append("flat image")
    if any(not i["same_size"] for i in images):
        found.append("size differs from the baseline's")
    return found


def _rounded(value: float | None) -> float | None:
    if value is None or math.isinf(value):
        return value
    return round(value, 2)
