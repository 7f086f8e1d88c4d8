"""WAV (RIFF/WAVE) in and out, sans-IO.

:func:`read_wav` turns an uploaded WAV file into what the engine protocol carries:
16-bit little-endian mono PCM and its sample rate. It accepts integer PCM of 8, 16,
24 or 32 bits and 32-bit IEEE float (plain or ``WAVE_FORMAT_EXTENSIBLE``), 1 to 8
channels, 8 to 192 kHz, and refuses everything else with a :class:`WavError` whose
message says what is wrong (meant for the client).

Conversions are exact where they can be: 8-bit and 16-bit samples map one to one,
24- and 32-bit samples keep their 16 most significant bits, floats are scaled by
32768 and rounded (clamped to the 16-bit range). Several channels are mixed down to
their mean (rounded down), computed at the source's precision before the reduction
to 16 bits.

:func:`wav_header` writes the 44-byte header of a PCM stream: exact when the data
size is known, with the ``0xFFFFFFFF`` "unknown length" sizes for a stream whose
length is not known yet.
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass
from typing import Literal

MIN_RATE = 8000
MAX_RATE = 192000
MAX_CHANNELS = 8
UNKNOWN_SIZE = 0xFFFFFFFF

ACCEPTED = "WAV audio (8/16/24/32-bit integer PCM or 32-bit float)"

_PCM = 0x0001
_FLOAT = 0x0003
_EXTENSIBLE = 0xFFFE
# The GUID of a WAVE_FORMAT_EXTENSIBLE sub-format is the format tag (2 bytes LE)
# followed by these 14 bytes.
_GUID_TAIL = bytes.fromhex("000000001000800000aa00389b71")

_COMPRESSED = {
    0x0002: "Microsoft ADPCM",
    0x0006: "A-law",
    0x0007: "mu-law",
    0x0011: "IMA ADPCM",
    0x0031: "GSM 6.10",
    0x0050: "MPEG audio",
    0x0055: "MP3",
    0x00FF: "AAC",
    0x0160: "WMA",
    0x0161: "WMA",
    0x1610: "AAC",
    0xF1AC: "FLAC",
}

_LITTLE = sys.byteorder == "little"
_FLIP = bytes(i ^ 0x80 for i in range(256))  # unsigned 8-bit -> signed high byte

if array("i").itemsize != 4 or array("h").itemsize != 2 or array("f").itemsize != 4:
    raise ImportError("neutrino.audio.wav needs 2-byte 'h' and 4-byte 'i'/'f' arrays")


class WavError(ValueError):
    """An upload that cannot be used; the message says why, in words for the client."""


@dataclass(frozen=True, slots=True)
class WavFormat:
    encoding: Literal["pcm", "float"]
    channels: int
    sample_rate: int
    bits: int

    @property
    def block_align(self) -> int:
        return self.channels * self.bits // 8


@dataclass(frozen=True, slots=True)
class Audio:
    """Decoded audio: 16-bit little-endian mono PCM."""

    pcm: bytes
    sample_rate: int
    source: WavFormat | None = None  # a WAV file's own format (None: another kind of file)

    @property
    def frames(self) -> int:
        return len(self.pcm) // 2

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate


# ----------------------------------------------------------------------------- reading


def _sniff(data: bytes) -> str | None:
    """A name for a well-known non-WAV container, from its first bytes."""
    head = data[:12]
    if head.startswith(b"fLaC"):
        return "FLAC"
    if head.startswith(b"OggS"):
        return "Ogg (Vorbis/Opus)"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "MP3 (MPEG audio)"
    if head[4:8] == b"ftyp":
        return "MP4/M4A"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "WebM/Matroska"
    if head.startswith(b"FORM") and head[8:12] in (b"AIFF", b"AIFC"):
        return "AIFF"
    if head.startswith(b"RIFX"):
        return "big-endian WAV (RIFX)"
    if head.startswith((b"RF64", b"BW64")):
        return "RF64/BW64"
    if head.startswith(b"RIFF"):
        return f"RIFF {bytes(head[8:12])!r}"
    return None


def _not_wav(data: bytes) -> WavError:
    kind = _sniff(data)
    what = f"it looks like {kind}" if kind else "no RIFF/WAVE header; raw PCM is not accepted"
    return WavError(f"the file is not a WAV file ({what}); this server accepts only {ACCEPTED}")


def _parse_fmt(body: bytes) -> WavFormat:
    if len(body) < 16:
        raise WavError(f"the WAV fmt chunk is too short ({len(body)} bytes, at least 16 needed)")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", body)
    if tag == _EXTENSIBLE:
        if len(body) < 40:
            raise WavError("the WAV fmt chunk is too short for WAVE_FORMAT_EXTENSIBLE")
        valid_bits = struct.unpack_from("<H", body, 18)[0]
        guid = body[24:40]
        if guid[2:] != _GUID_TAIL:
            raise WavError("the WAV file uses an unknown WAVE_FORMAT_EXTENSIBLE sub-format")
        if valid_bits > bits:
            raise WavError(
                f"the WAV fmt chunk is inconsistent: {valid_bits} valid bits in {bits}-bit samples"
            )
        tag = int.from_bytes(guid[:2], "little")
    encoding: Literal["pcm", "float"]
    if tag == _PCM:
        encoding = "pcm"
        if bits not in (8, 16, 24, 32):
            raise WavError(
                f"{bits}-bit integer PCM is not supported (8, 16, 24 or 32 bits are accepted)"
            )
    elif tag == _FLOAT:
        encoding = "float"
        if bits != 32:
            raise WavError(f"{bits}-bit float WAV is not supported (only 32-bit float)")
    else:
        name = _COMPRESSED.get(tag, f"format tag 0x{tag:04x}")
        raise WavError(
            f"compressed WAV audio ({name}) is not supported; this server accepts only {ACCEPTED}"
        )
    if not 1 <= channels <= MAX_CHANNELS:
        raise WavError(f"the WAV file has {channels} channels; 1 to {MAX_CHANNELS} are accepted")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise WavError(
            f"the WAV sample rate {rate} Hz is not supported ({MIN_RATE} to {MAX_RATE} Hz)"
        )
    fmt = WavFormat(encoding, channels, rate, bits)
    if block_align != fmt.block_align:
        raise WavError(
            f"the WAV fmt chunk is inconsistent: block align {block_align} for {channels} "
            f"channels of {bits} bits (expected {fmt.block_align})"
        )
    return fmt


def _chunk_name(cid: bytes) -> str:
    return cid.decode("latin-1").strip() or repr(cid)


def _streamed(data: bytes) -> bool:
    """The header of a WAV written as a stream (ffmpeg to a pipe, our own speech output):
    the RIFF size is unknown too. A data size of 0xFFFFFFFF in a file whose RIFF size is
    known is a header that lies, refused like any data size past the end of the file."""
    return int.from_bytes(data[4:8], "little") == UNKNOWN_SIZE


def read_wav(data: bytes) -> Audio:
    """Decode a WAV file into 16-bit LE mono PCM; raises :class:`WavError`."""
    n = len(data)
    if n == 0:
        raise WavError("the file is empty")
    if n < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        if n < 12 and data[:4] == b"RIFF":
            raise WavError(f"the WAV file is truncated ({n} bytes, shorter than its header)")
        raise _not_wav(data)
    fmt: WavFormat | None = None
    start = end = -1  # the data chunk's payload
    open_ended = False
    pos = 12
    while pos < n:
        if n - pos < 8:
            if start >= 0 and fmt is not None:
                break  # stray trailing bytes after the chunks we need
            raise WavError("the WAV file is truncated (a chunk header is cut off)")
        cid = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        body = pos + 8
        left = n - body
        if cid == b"data":
            if start >= 0:
                pos = body + size + (size & 1)  # a second data chunk: ignored
                continue
            if size == UNKNOWN_SIZE and _streamed(data):
                start, end, open_ended = body, n, True  # the samples run to the file's end
                break
            if size > left:
                raise WavError(
                    f"the WAV file is truncated: its data chunk declares {size} bytes but "
                    f"only {left} are present"
                )
            start, end = body, body + size
            if fmt is not None:
                break
        else:
            if size > left:
                raise WavError(
                    f"the WAV file is truncated: its {_chunk_name(cid)!r} chunk declares "
                    f"{size} bytes but only {left} are present"
                )
            if cid == b"fmt ":
                if fmt is not None:
                    raise WavError("the WAV file has more than one fmt chunk")
                fmt = _parse_fmt(data[body : body + size])
                if start >= 0:
                    break
        pos = body + size + (size & 1)
    if fmt is None:
        raise WavError("the WAV file has no fmt chunk (it describes the sample format)")
    if start < 0:
        raise WavError("the WAV file has no data chunk")
    block = fmt.block_align
    usable = end - start
    if usable % block:
        if not open_ended:
            raise WavError(
                f"the WAV data chunk holds {usable} bytes, not a whole number of "
                f"{block}-byte frames"
            )
        usable -= usable % block  # a stream cut mid-frame: drop the partial frame
    if usable == 0:
        raise WavError("the WAV file has no audio samples (its data chunk is empty)")
    raw = data[start : start + usable]
    return Audio(_to_mono16(raw, fmt), fmt.sample_rate, fmt)


# ----------------------------------------------------------------------------- conversion


def _array(typecode: str, little_endian: bytes | bytearray) -> array[int]:
    a: array[int] = array(typecode, little_endian)
    if not _LITTLE:
        a.byteswap()
    return a


def _floats(little_endian: bytes) -> array[float]:
    a: array[float] = array("f", little_endian)
    if not _LITTLE:
        a.byteswap()
    return a


def _le_bytes(a: array[int]) -> bytes:
    if not _LITTLE:
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _ints(raw: bytes, bits: int) -> tuple[array[int], int]:
    """Signed samples and the divisor that brings them to the 16-bit scale."""
    if bits == 8:  # unsigned: (u - 128) << 8, built as int16 with u ^ 0x80 as high byte
        wide = bytearray(2 * len(raw))
        wide[1::2] = raw.translate(_FLIP)
        return _array("h", wide), 1
    if bits == 16:
        return _array("h", raw), 1
    if bits == 24:  # sign-extended by placing the 3 bytes at the top of an int32
        wide = bytearray(4 * (len(raw) // 3))
        wide[1::4] = raw[0::3]
        wide[2::4] = raw[1::3]
        wide[3::4] = raw[2::3]
        return _array("i", wide), 1 << 16
    return _array("i", raw), 1 << 16


def _top16(raw: bytes, width: int) -> bytes:
    """The two most significant bytes of each little-endian ``width``-byte sample."""
    out = bytearray(2 * (len(raw) // width))
    out[0::2] = raw[width - 2 :: width]
    out[1::2] = raw[width - 1 :: width]
    return bytes(out)


def _quantize(values: list[float] | array[float]) -> bytes:
    """Floats in [-1, 1] -> int16 (x 32768, rounded half up, clamped; NaN -> 0)."""
    hi = 32767.0 / 32768.0
    try:
        ints = [int(min(max(v, -1.0), hi) * 32768.0 + 32768.5) - 32768 for v in values]
    except ValueError:  # NaN somewhere
        ints = [
            0 if v != v else int(min(max(v, -1.0), hi) * 32768.0 + 32768.5) - 32768 for v in values
        ]
    return _le_bytes(array("h", ints))


def _to_mono16(raw: bytes, fmt: WavFormat) -> bytes:
    ch = fmt.channels
    if fmt.encoding == "float":
        floats = _floats(raw)
        if ch == 1:
            return _quantize(floats)
        cols = [floats[c::ch] for c in range(ch)]
        return _quantize([s / ch for s in map(sum, zip(*cols, strict=True))])
    if ch == 1:
        if fmt.bits == 16:
            return bytes(raw)
        if fmt.bits > 16:
            return _top16(raw, fmt.bits // 8)
    samples, div = _ints(raw, fmt.bits)
    if ch == 1:
        return _le_bytes(samples)
    d = ch * div
    cols16 = [samples[c::ch] for c in range(ch)]
    return _le_bytes(array("h", [s // d for s in map(sum, zip(*cols16, strict=True))]))


# ----------------------------------------------------------------------------- writing


def wav_header(
    sample_rate: int, *, channels: int = 1, bits: int = 16, data_size: int | None = None
) -> bytes:
    """The 44-byte header of an integer PCM WAV file.

    With ``data_size`` None the RIFF and data sizes are ``0xFFFFFFFF``, the usual
    marker of a stream whose length is not known when the header is sent.
    """
    if sample_rate <= 0 or sample_rate > 0xFFFFFFFF:
        raise ValueError(f"bad sample rate {sample_rate}")
    if not 1 <= channels <= 0xFFFF:
        raise ValueError(f"bad channel count {channels}")
    if bits not in (8, 16, 24, 32):
        raise ValueError(f"bad bits per sample {bits}")
    block = channels * bits // 8
    if data_size is None:
        riff_size = data_len = UNKNOWN_SIZE
    else:
        if not 0 <= data_size <= UNKNOWN_SIZE - 37:
            raise ValueError(f"bad data size {data_size}")
        data_len = data_size
        riff_size = 36 + data_size + (data_size & 1)
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        riff_size,
        b"WAVE",
        b"fmt ",
        16,
        _PCM,
        channels,
        sample_rate,
        sample_rate * block,
        block,
        bits,
        b"data",
        data_len,
    )


def encode_wav(pcm: bytes, sample_rate: int, *, channels: int = 1, bits: int = 16) -> bytes:
    """A complete WAV file (exact sizes) around little-endian integer PCM."""
    pad = b"\x00" if len(pcm) & 1 else b""
    header = wav_header(sample_rate, channels=channels, bits=bits, data_size=len(pcm))
    return header + pcm + pad
