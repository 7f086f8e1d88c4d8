"""Images in chat messages: data URIs decoded and checked before anything reaches an engine.

Only ``data:`` URIs are accepted: Neutrino never fetches URLs on a client's behalf.
Pillow identifies the format (PNG or JPEG), reads the size and verifies the file;
anything else is a 400 naming the message part.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings

from PIL import Image as PILImage

from neutrino.engine.messages import Image as Image  # re-exported for front ends
from neutrino.pipeline.fields import Loc, invalid

MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGE_PIXELS = 64 * 1024 * 1024
MAX_IMAGES = 16
_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg"}


# Pillow finds its image formats on first use (importing every plugin: some 40 ms that
# would hold the event loop on the first request with an image); find them now.
PILImage.init()


def decode_image_url(url: str, at: Loc) -> Image:
    """The checked image behind a data URI (``data:image/png;base64,...``)."""
    if not url.startswith("data:"):
        raise invalid(
            at, "only data: URIs are accepted for images (the server does not fetch URLs)"
        )
    header, sep, payload = url.partition(",")
    if not sep or ";base64" not in header:
        raise invalid(at, "an image data URI must be base64-encoded")
    if len(payload) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise invalid(at, f"an image may be at most {MAX_IMAGE_BYTES} bytes")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(at, "the image data is not valid base64") from None
    return check_image(data, at)


def check_image(data: bytes, at: Loc) -> Image:
    if not data:
        raise invalid(at, "the image is empty")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            with PILImage.open(io.BytesIO(data)) as img:
                fmt = img.format or ""
                width, height = img.size
                if fmt not in _FORMATS:
                    raise invalid(at, f"images must be PNG or JPEG, not {fmt or 'unknown'}")
                if width * height > MAX_IMAGE_PIXELS:
                    raise invalid(at, f"an image may have at most {MAX_IMAGE_PIXELS} pixels")
                img.verify()
    except (
        OSError,
        SyntaxError,
        ValueError,
        PILImage.DecompressionBombWarning,
        PILImage.DecompressionBombError,
    ):
        raise invalid(at, "the image cannot be decoded (corrupt or not an image)") from None
    return Image(data=data, mime_type=_FORMATS[fmt], width=width, height=height)
