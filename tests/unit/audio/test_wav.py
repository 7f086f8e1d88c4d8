"""WAV decoding and header writing, on files made here with ``wave`` and ``struct``."""

from __future__ import annotations

import io
import math
import random
import struct
import wave
from array import array

import pytest

from neutrino.audio.wav import (
    UNKNOWN_SIZE,
    WavError,
    encode_wav,
    read_wav,
    wav_header,
)

RNG = random.Random(1234)


def make_wav(frames: bytes, *, width: int, channels: int = 1, rate: int = 16000) -> bytes:
    """An integer PCM WAV written by the standard library."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(frames)
    return buf.getvalue()


def fmt_chunk(
    tag: int, channels: int, rate: int, bits: int, *, block: int | None = None, extra: bytes = b""
) -> bytes:
    block = channels * bits // 8 if block is None else block
    body = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits) + extra
    return b"fmt " + struct.pack("<I", len(body)) + body


def chunk(cid: bytes, body: bytes, *, size: int | None = None) -> bytes:
    n = len(body) if size is None else size
    return cid + struct.pack("<I", n) + body + (b"\x00" if len(body) & 1 else b"")


def riff(*chunks: bytes) -> bytes:
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def extensible(sub_tag: int, channels: int, rate: int, bits: int, valid: int) -> bytes:
    guid = struct.pack("<H", sub_tag) + bytes.fromhex("000000001000800000aa00389b71")
    extra = struct.pack("<HHI", 22, valid, 0) + guid
    return fmt_chunk(0xFFFE, channels, rate, bits, extra=extra)


def s16(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}h", *values)


def int24(values: list[int]) -> bytes:
    return b"".join((v & 0xFFFFFF).to_bytes(3, "little") for v in values)


def as_ints(pcm: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(pcm) // 2}h", pcm))


# ----------------------------------------------------------------------------- accepted


def test_16bit_mono_round_trip() -> None:
    values = [RNG.randint(-32768, 32767) for _ in range(4000)] + [-32768, 32767, 0]
    audio = read_wav(make_wav(s16(values), width=2, rate=22050))
    assert audio.pcm == s16(values)
    assert audio.sample_rate == 22050
    assert audio.frames == len(values)
    assert audio.duration_s == pytest.approx(len(values) / 22050)
    assert audio.source is not None
    assert audio.source.bits == 16 and audio.source.channels == 1


def test_8bit_unsigned_is_widened_exactly() -> None:
    raw = bytes(range(256))
    audio = read_wav(make_wav(raw, width=1, rate=8000))
    assert as_ints(audio.pcm) == [(u - 128) << 8 for u in raw]


def test_24bit_keeps_the_top_16_bits() -> None:
    values = [RNG.randint(-(1 << 23), (1 << 23) - 1) for _ in range(3000)]
    values += [-(1 << 23), (1 << 23) - 1, -1, 0, 255, 256, -256, -257]
    audio = read_wav(make_wav(int24(values), width=3, rate=48000))
    assert as_ints(audio.pcm) == [v >> 8 for v in values]


def test_24bit_round_trip_of_widened_16bit() -> None:
    values = [RNG.randint(-32768, 32767) for _ in range(1000)]
    audio = read_wav(make_wav(int24([v << 8 for v in values]), width=3))
    assert audio.pcm == s16(values)


def test_32bit_integer_keeps_the_top_16_bits() -> None:
    values = [RNG.randint(-(1 << 31), (1 << 31) - 1) for _ in range(3000)]
    values += [-(1 << 31), (1 << 31) - 1, -1, 65535, 65536]
    frames = struct.pack(f"<{len(values)}i", *values)
    audio = read_wav(make_wav(frames, width=4, rate=96000))
    assert as_ints(audio.pcm) == [v >> 16 for v in values]


def test_float32_mono_exact_and_clamped() -> None:
    exact = [RNG.randint(-32768, 32767) for _ in range(2000)] + [-32768, 32767, 0]
    floats = [v / 32768 for v in exact] + [1.0, 1.5, -1.0, -2.0, math.inf, -math.inf, math.nan]
    data = riff(
        fmt_chunk(3, 1, 16000, 32),
        chunk(b"data", struct.pack(f"<{len(floats)}f", *floats)),
    )
    audio = read_wav(data)
    assert as_ints(audio.pcm) == [*exact, 32767, 32767, -32768, -32768, 32767, -32768, 0]
    assert audio.source is not None and audio.source.encoding == "float"


def test_float32_rounds_to_nearest() -> None:
    floats = [0.4 / 32768, 0.6 / 32768, -0.4 / 32768, -0.6 / 32768, 100.5 / 32768]
    data = riff(fmt_chunk(3, 1, 8000, 32), chunk(b"data", struct.pack("<5f", *floats)))
    assert as_ints(read_wav(data).pcm) == [0, 1, 0, -1, 101]


def test_stereo_16bit_is_averaged() -> None:
    left = [RNG.randint(-32768, 32767) for _ in range(2000)] + [32767, -32768, 3]
    right = [RNG.randint(-32768, 32767) for _ in range(2000)] + [32767, -32768, -4]
    frames = s16([x for pair in zip(left, right, strict=True) for x in pair])
    audio = read_wav(make_wav(frames, width=2, channels=2, rate=44100))
    assert as_ints(audio.pcm) == [(a + b) // 2 for a, b in zip(left, right, strict=True)]
    assert audio.sample_rate == 44100 and audio.frames == len(left)


def test_identical_channels_downmix_losslessly() -> None:
    values = [RNG.randint(-32768, 32767) for _ in range(500)]
    frames = s16([v for v in values for _ in range(5)])
    audio = read_wav(make_wav(frames, width=2, channels=5))
    assert audio.pcm == s16(values)


def test_six_channel_24bit_mean_at_source_precision() -> None:
    ch = 6
    samples = [[RNG.randint(-(1 << 23), (1 << 23) - 1) for _ in range(ch)] for _ in range(800)]
    frames = int24([v for frame in samples for v in frame])
    audio = read_wav(make_wav(frames, width=3, channels=ch, rate=32000))
    assert as_ints(audio.pcm) == [sum(f) // (ch * 256) for f in samples]


def test_eight_channel_8bit_and_32bit() -> None:
    frames8 = bytes(RNG.randrange(256) for _ in range(8 * 300))
    audio = read_wav(make_wav(frames8, width=1, channels=8))
    want = [sum((u - 128) << 8 for u in frames8[i : i + 8]) // 8 for i in range(0, len(frames8), 8)]
    assert as_ints(audio.pcm) == want
    values = [RNG.randint(-(1 << 31), (1 << 31) - 1) for _ in range(3 * 300)]
    audio = read_wav(make_wav(struct.pack(f"<{len(values)}i", *values), width=4, channels=3))
    want = [sum(values[i : i + 3]) // (3 << 16) for i in range(0, len(values), 3)]
    assert as_ints(audio.pcm) == want


def test_float_stereo_is_averaged_then_rounded() -> None:
    pairs = [(0.5, -0.25), (1.0, 1.0), (-1.0, -1.0), (0.1, 0.2), (3.0, 3.0)]
    raw = struct.pack(f"<{2 * len(pairs)}f", *(x for p in pairs for x in p))
    audio = read_wav(riff(fmt_chunk(3, 2, 24000, 32), chunk(b"data", raw)))
    f32 = [struct.unpack("<f", struct.pack("<f", x))[0] for p in pairs for x in p]
    means = [(f32[i] + f32[i + 1]) / 2 for i in range(0, len(f32), 2)]
    want = [min(32767, max(-32768, math.floor(m * 32768 + 0.5))) for m in means]
    assert as_ints(audio.pcm) == want


@pytest.mark.parametrize(("sub_tag", "bits"), [(1, 16), (1, 24), (1, 32), (3, 32)])
def test_wave_format_extensible(sub_tag: int, bits: int) -> None:
    values = [RNG.randint(-32768, 32767) for _ in range(300)]
    if sub_tag == 3:
        raw = struct.pack(f"<{len(values) * 2}f", *(v / 32768 for v in values for _ in "lr"))
    else:
        shift = bits - 16
        wide = [v << shift for v in values for _ in "lr"]
        raw = b"".join((w & ((1 << bits) - 1)).to_bytes(bits // 8, "little") for w in wide)
    audio = read_wav(riff(extensible(sub_tag, 2, 48000, bits, bits), chunk(b"data", raw)))
    assert audio.pcm == s16(values)


@pytest.mark.parametrize("rate", [8000, 11025, 16000, 44100, 96000, 192000])
def test_sample_rates_in_range(rate: int) -> None:
    assert read_wav(make_wav(s16([1, 2, 3]), width=2, rate=rate)).sample_rate == rate


def test_other_chunks_order_and_padding() -> None:
    values = [5, -6, 7]
    data = riff(
        chunk(b"LIST", b"INFOabc"),  # odd size: padded
        chunk(b"data", s16(values)),  # data before fmt
        chunk(b"junk", b"x" * 3),
        fmt_chunk(1, 1, 16000, 16),
    )
    assert as_ints(read_wav(data).pcm) == values
    # An odd-sized 8-bit data chunk whose pad byte is missing at the end of the file.
    odd = riff(fmt_chunk(1, 1, 8000, 8), chunk(b"data", b"\x80\x81\x7f"))[:-1]
    assert as_ints(read_wav(odd).pcm) == [0, 256, -256]
    # Trailing bytes after the needed chunks are ignored.
    assert read_wav(make_wav(s16(values), width=2) + b"\x00\x01").pcm == s16(values)


def test_streamed_unknown_length_is_read_to_the_end() -> None:
    values = [RNG.randint(-32768, 32767) for _ in range(100)]
    audio = read_wav(wav_header(24000) + s16(values))
    assert audio.pcm == s16(values) and audio.sample_rate == 24000
    # A stream cut in the middle of a frame loses only the partial frame.
    assert read_wav(wav_header(24000) + s16(values) + b"\x01").pcm == s16(values)


def test_an_unknown_data_length_in_a_file_of_known_length_is_refused() -> None:
    values = [RNG.randint(-32768, 32767) for _ in range(100)]
    data = bytearray(wav_header(16000, data_size=200) + s16(values))
    struct.pack_into("<I", data, 40, UNKNOWN_SIZE)  # only the data chunk says "unknown"
    message = refused(bytes(data))
    assert "declares 4294967295 bytes but only 200 are present" in message


# ----------------------------------------------------------------------------- refused


def refused(data: bytes) -> str:
    with pytest.raises(WavError) as exc:
        read_wav(data)
    return str(exc.value)


def test_not_wav_files_are_named() -> None:
    assert "empty" in refused(b"")
    raw = refused(s16([1, 2, 3, 4, 5, 6, 7, 8]))
    assert "not a WAV file" in raw and "raw PCM" in raw and "WAV" in raw
    assert "FLAC" in refused(b"fLaC\x00\x00\x00\x22" + bytes(40))
    assert "MP3" in refused(b"ID3\x04\x00" + bytes(40))
    assert "MP3" in refused(b"\xff\xfb\x90\x64" + bytes(40))
    assert "Ogg" in refused(b"OggS" + bytes(40))
    assert "MP4" in refused(b"\x00\x00\x00\x20ftypM4A " + bytes(40))
    assert "WebM" in refused(b"\x1a\x45\xdf\xa3" + bytes(40))
    assert "RIFX" in refused(b"RIFX\x00\x00\x00\x24WAVE" + bytes(40))
    assert "AVI" in refused(b"RIFF\x00\x00\x00\x24AVI " + bytes(40))
    assert "only" in refused(b"hello world, this is text")


def test_truncated_files() -> None:
    good = make_wav(s16(list(range(100))), width=2)
    assert "truncated" in refused(good[:8])
    assert "truncated" in refused(good[:20])  # inside the fmt chunk
    msg = refused(good[:-10])
    assert "truncated" in msg and "200 bytes" in msg and "190" in msg
    assert "truncated" in refused(good[:40])  # the data chunk header is cut off


def test_structural_refusals() -> None:
    assert "no fmt chunk" in refused(riff(chunk(b"data", s16([1, 2]))))
    assert "no data chunk" in refused(riff(fmt_chunk(1, 1, 16000, 16)))
    assert "no audio samples" in refused(riff(fmt_chunk(1, 1, 16000, 16), chunk(b"data", b"")))
    assert "no audio samples" in refused(make_wav(b"", width=2))
    assert "whole number" in refused(riff(fmt_chunk(1, 2, 16000, 16), chunk(b"data", b"\x00" * 6)))
    assert "more than one fmt" in refused(
        riff(fmt_chunk(1, 1, 16000, 16), fmt_chunk(1, 1, 16000, 16), chunk(b"data", b"\x00\x00"))
    )
    assert "too short" in refused(riff(chunk(b"fmt ", b"\x01\x00\x01\x00"), chunk(b"data", b"")))
    bad_block = fmt_chunk(1, 2, 16000, 16, block=2)
    assert "block align" in refused(riff(bad_block, chunk(b"data", b"\x00" * 8)))


@pytest.mark.parametrize(
    ("tag", "bits", "words"),
    [
        (2, 4, "compressed WAV audio (Microsoft ADPCM)"),
        (6, 8, "A-law"),
        (7, 8, "mu-law"),
        (0x11, 4, "IMA ADPCM"),
        (0x55, 16, "MP3"),
        (0x1234, 16, "0x1234"),
    ],
)
def test_compressed_formats_are_refused(tag: int, bits: int, words: str) -> None:
    msg = refused(riff(fmt_chunk(tag, 1, 16000, bits, block=1), chunk(b"data", b"\x00" * 8)))
    assert words in msg and "not supported" in msg


def test_unsupported_sample_formats() -> None:
    data = b"\x00" * 16
    assert "12-bit integer PCM" in refused(
        riff(fmt_chunk(1, 1, 16000, 12, block=2), chunk(b"data", data))
    )
    assert "64-bit float" in refused(riff(fmt_chunk(3, 1, 16000, 64), chunk(b"data", data)))
    assert "9 channels" in refused(riff(fmt_chunk(1, 9, 16000, 16), chunk(b"data", b"\0" * 18)))
    assert "0 channels" in refused(riff(fmt_chunk(1, 0, 16000, 16), chunk(b"data", data)))
    assert "7999 Hz" in refused(riff(fmt_chunk(1, 1, 7999, 16), chunk(b"data", data)))
    assert "192001 Hz" in refused(riff(fmt_chunk(1, 1, 192001, 16), chunk(b"data", data)))
    odd_guid = fmt_chunk(0xFFFE, 1, 16000, 16, extra=struct.pack("<HHI", 22, 16, 0) + bytes(16))
    assert "sub-format" in refused(riff(odd_guid, chunk(b"data", data)))
    assert "valid bits" in refused(riff(extensible(1, 1, 16000, 16, 24), chunk(b"data", data)))


# ----------------------------------------------------------------------------- writing


def test_exact_header_reads_back_with_wave() -> None:
    values = [RNG.randint(-32768, 32767) for _ in range(1234)]
    blob = encode_wav(s16(values), 24000)
    assert len(blob) == 44 + 2 * len(values)
    with wave.open(io.BytesIO(blob)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
        assert w.getnframes() == len(values)
        assert w.readframes(len(values)) == s16(values)
    assert read_wav(blob).pcm == s16(values)


def test_header_fields() -> None:
    h = wav_header(16000, channels=2, bits=24, data_size=601)
    (riff_size,) = struct.unpack_from("<I", h, 4)
    assert riff_size == 36 + 602  # the odd data size is padded
    tag, ch, rate, byte_rate, block, bits = struct.unpack_from("<HHIIHH", h, 20)
    assert (tag, ch, rate, byte_rate, block, bits) == (1, 2, 16000, 16000 * 6, 6, 24)
    assert struct.unpack_from("<4sI", h, 36) == (b"data", 601)
    assert len(encode_wav(b"\x01\x02\x03", 8000, bits=8)) == 44 + 4


def test_streaming_header_has_unknown_sizes() -> None:
    h = wav_header(24000)
    assert len(h) == 44
    assert struct.unpack_from("<I", h, 4)[0] == UNKNOWN_SIZE
    assert struct.unpack_from("<I", h, 40)[0] == UNKNOWN_SIZE
    samples = array("h", [1, -1, 300])
    with wave.open(io.BytesIO(h + samples.tobytes())) as w:
        assert w.getframerate() == 24000
        assert w.readframes(1 << 20) == samples.tobytes()


@pytest.mark.parametrize(
    "kwargs",
    [{"sample_rate": 0}, {"sample_rate": 8000, "bits": 12}, {"sample_rate": 8000, "channels": 0}],
)
def test_header_refuses_bad_arguments(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        wav_header(**kwargs)
    with pytest.raises(ValueError):
        wav_header(8000, data_size=-1)
