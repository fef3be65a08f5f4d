"""Small PNGs made in memory for uploads, and decoding of what the server returns."""

from __future__ import annotations

import io

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png(color: tuple[int, int, int], size: int = 8, mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (size, size), color).save(buffer, format="PNG")
    return buffer.getvalue()


def half_transparent(size: int = 8) -> bytes:
    """An RGBA PNG whose left half is transparent and right half opaque."""
    image = Image.new("RGBA", (size, size), (0, 0, 0, 255))
    for x in range(size // 2):
        for y in range(size):
            image.putpixel((x, y), (0, 0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def decode(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return image.copy()
