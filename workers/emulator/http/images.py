"""Image bytes: the PNGs the emulator writes, sampler previews, /view conversions, masks.

Pictures are cheap deterministic gradients (a tint derived from the node's inputs), so a
1024x1024 save costs milliseconds, and two different prompts give different files.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import IO, Any

from PIL import Image, ImageOps
from PIL.PngImagePlugin import PngInfo


def tint_colors(tint: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Two colours from a 24-bit tint: the tint itself and its complement."""
    red, green, blue = (tint >> 16) & 255, (tint >> 8) & 255, tint & 255
    return (red, green, blue), (255 - red, 255 - green, 255 - blue)


def render(width: int, height: int, tint: int, solid: bool = False) -> Image.Image:
    """An RGB picture of the given size: the tint alone, or a gradient to its complement."""
    first, second = tint_colors(tint)
    if solid:
        return Image.new("RGB", (max(1, width), max(1, height)), first)
    mask = Image.linear_gradient("L").resize((max(1, width), max(1, height)))
    return Image.composite(
        Image.new("RGB", mask.size, first), Image.new("RGB", mask.size, second), mask
    )


def png_info(prompt: Any | None, extra_pnginfo: Mapping[str, Any] | None) -> PngInfo:
    """SaveImage's text chunks: `prompt`, then one per extra_pnginfo key, JSON-encoded."""
    info = PngInfo()
    if prompt is not None:
        info.add_text("prompt", json.dumps(prompt))
    for key, value in (extra_pnginfo or {}).items():
        info.add_text(key, json.dumps(value))
    return info


def write_png(path: str, image: Image.Image, info: PngInfo | None, compress_level: int) -> None:
    image.save(path, pnginfo=info, compress_level=compress_level)


def encode(image: Image.Image, image_format: str) -> bytes:
    """JPEG (quality 95) or PNG bytes, as ComfyUI encodes preview frames."""
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, quality=95, compress_level=1)
    return buffer.getvalue()


def sampler_preview(width: int, height: int, tint: int, step: int, method: str, size: int) -> bytes:
    """A JPEG preview of a sampler step: latent-sized (latent2rgb), or up to `size` (taesd)."""
    # latent2rgb (and auto without TAESD) shows the latent itself, 1/8 of the image size.
    shape = (width, height) if method == "taesd" else (max(1, width // 8), max(1, height // 8))
    image = render(shape[0], shape[1], (tint + step * 0x0F0F0F) & 0xFFFFFF)
    if max(image.size) > size:
        image = ImageOps.contain(image, (size, size), Image.Resampling.BILINEAR)
    return encode(image, "JPEG")


def view_variant(path: str, query: Mapping[str, str]) -> tuple[bytes, str] | None:
    """The re-encoded body of `/view?preview=...` or `channel=rgb|a`, or None for the file."""
    if "preview" in query:
        return _preview_variant(path, query["preview"], query.get("channel", ""))
    channel = query.get("channel", "rgba")
    if channel == "rgb":
        return _rgb(path), "image/png"
    if channel == "a":
        return _alpha(path), "image/png"
    return None


def _preview_variant(path: str, preview: str, channel: str) -> tuple[bytes, str]:
    parts = preview.split(";")
    image_format = parts[0]
    if image_format not in ("webp", "jpeg") or "a" in channel:
        image_format = "webp"
    quality = int(parts[-1]) if parts[-1].isdigit() else 90
    with Image.open(path) as opened:
        image: Image.Image = opened
        if image_format == "jpeg" or channel == "rgb":
            image = image.convert("RGB")
        buffer = io.BytesIO()
        image.save(buffer, format=image_format, quality=quality)
    return buffer.getvalue(), f"image/{image_format}"


def _rgb(path: str) -> bytes:
    with Image.open(path) as image:
        if image.mode == "RGBA":
            red, green, blue, _ = image.split()
            converted = Image.merge("RGB", (red, green, blue))
        else:
            converted = image.convert("RGB")
    buffer = io.BytesIO()
    converted.save(buffer, format="PNG")
    return buffer.getvalue()


def _alpha(path: str) -> bytes:
    with Image.open(path) as image:
        alpha = image.split()[3] if image.mode == "RGBA" else Image.new("L", image.size, 255)
        out = Image.new("RGBA", image.size)
    out.putalpha(alpha)
    buffer = io.BytesIO()
    out.save(buffer, format="PNG")
    return buffer.getvalue()


def apply_mask(original_path: str, mask: IO[bytes], destination: str) -> None:
    """/upload/mask: the original with its alpha replaced by the mask's, text chunks kept."""
    with Image.open(original_path) as original:
        info = PngInfo()
        for key, value in getattr(original, "text", {}).items():
            info.add_text(key, value)
        rgba = original.convert("RGBA")
    with Image.open(mask) as mask_image:
        rgba.putalpha(mask_image.convert("RGBA").getchannel("A"))
    rgba.save(destination, compress_level=4, pnginfo=info)


def load_rgb(path: str) -> Image.Image:
    """An image file's pixels as LoadImage passes them on (RGB; alpha becomes the mask)."""
    with Image.open(path) as image:
        return ImageOps.exif_transpose(image).convert("RGB")


def size_of(path: str) -> tuple[int, int]:
    """Width and height of an image file as LoadImage sees it (EXIF orientation applied)."""
    with Image.open(path) as image:
        return ImageOps.exif_transpose(image).size
