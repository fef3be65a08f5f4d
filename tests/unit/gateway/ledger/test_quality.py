"""The quality guard on images."""

from __future__ import annotations

import io
import math

from PIL import Image

from gateway.ledger.quality import facts, judge, psnr_db
from workers.emulator.http.images import render


def png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


PICTURE = png(render(64, 48, 0x3366CC))
BLACK = png(Image.new("RGB", (64, 48)))
FLAT = png(Image.new("RGB", (64, 48), (120, 20, 200)))


def test_a_black_or_flat_image_is_broken_a_picture_is_not() -> None:
    assert facts(PICTURE) == {"size": [64, 48], "black_share": 0.0, "flat": False, "broken": False}
    assert facts(BLACK)["black_share"] == 1.0 and facts(BLACK)["broken"]
    assert facts(FLAT)["flat"] and facts(FLAT)["black_share"] == 0.0


def test_psnr_against_the_baseline() -> None:
    assert psnr_db(PICTURE, PICTURE) == math.inf
    noisy = Image.open(io.BytesIO(PICTURE)).convert("RGB")
    noisy.putpixel((0, 0), (255, 255, 255))
    assert 30 < (psnr_db(PICTURE, png(noisy)) or 0) < math.inf
    assert psnr_db(PICTURE, png(render(32, 32, 0x3366CC))) is None


def test_judging_a_configuration_against_the_baseline() -> None:
    assert judge([PICTURE], [PICTURE])["sound"] is True
    black = judge([PICTURE], [BLACK])
    assert black["sound"] is False and black["reason"] == "black image"
    assert judge([PICTURE], [FLAT])["reason"] == "flat image"
    smaller = judge([PICTURE], [png(render(32, 32, 0x3366CC))])
    assert smaller["reason"] == "size differs from the baseline's"
    assert judge([PICTURE], [])["sound"] is False
