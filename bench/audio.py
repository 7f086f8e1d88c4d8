"""`make bench`'s audio section: what decoding an upload costs, on a 10-minute file.

Ten minutes of speech-like stereo sound at 44.1 kHz, encoded as mp3 (128 kb/s), m4a (AAC)
and flac, each decoded by ``neutrino.audio.codecs.decode_upload`` to 16-bit mono at 16 kHz
(what a Whisper engine declares) in a fresh process: the wall time of the decode and the
process's peak resident memory above what it held before (FFmpeg's buffers included,
which Python's allocators do not see).

Run alone: ``python -m bench.audio``.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import tempfile
from array import array
from pathlib import Path
from typing import Any

SECONDS = 600
RATE = 44100


def _source(seconds: int = SECONDS) -> Any:
    """A stereo frame source: a voiced tone with harmonics under a syllable envelope."""
    import av

    chunk = RATE  # one second at a time
    base = [
        int(6000 * (0.55 + 0.45 * math.sin(2 * math.pi * 4 * i / RATE))
            * sum(math.sin(2 * math.pi * 140 * k * i / RATE) / k for k in range(1, 5)))
        for i in range(chunk)
    ]  # fmt: skip
    stereo = array("h", (v for s in base for v in (s, s // 2))).tobytes()
    for _ in range(seconds):
        frame = av.AudioFrame(format="s16", layout="stereo", samples=chunk)
        frame.planes[0].update(stereo)
        frame.sample_rate = RATE
        yield frame


def make_file(container: str, codec: str, bit_rate: int = 0) -> bytes:
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream: Any = out.add_stream(codec, rate=RATE, layout="stereo")
        if bit_rate:
            stream.codec_context.bit_rate = bit_rate
        ctx = stream.codec_context
        resampler = av.AudioResampler(format=ctx.format.name, layout="stereo", rate=RATE)
        fifo = av.AudioFifo()
        size = ctx.frame_size or 4096
        for frame in _source():
            for piece in resampler.resample(frame):
                fifo.write(piece)
            while fifo.samples >= size:
                for packet in stream.encode(fifo.read(size)):
                    out.mux(packet)
        if fifo.samples:
            for packet in stream.encode(fifo.read()):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


_CHILD = """
import json, resource, sys, time
from neutrino.audio.codecs import decode_upload
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
audio = decode_upload(data, rate=16000, max_seconds=3600, max_decode_s=600)
took = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": took, "peak_kib": peak - before, "pcm_bytes": len(audio.pcm),
                  "audio_s": len(audio.pcm) / 2 / audio.sample_rate}))
"""


def measure() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, container, codec, bit_rate in (
            ("mp3", "mp3", "libmp3lame", 128_000),
            ("m4a", "ipod", "aac", 128_000),
            ("flac", "flac", "flac", 0),
        ):
            path = Path(tmp) / f"ten-minutes.{name}"
            path.write_bytes(make_file(container, codec, bit_rate))
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(path)],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(done.stdout)
            row["file_bytes"] = path.stat().st_size
            out[name] = row
    return out


def print_audio(report: dict[str, Any]) -> None:
    print(
        f"\nAudio uploads: a {SECONDS // 60}-minute file (44.1 kHz stereo) decoded to 16 kHz mono:"
    )
    print("  format   file MB   decode s   x realtime   peak MB above start   PCM MB")
    for name, r in report.items():
        print(
            f"  {name:<7} {r['file_bytes'] / 1e6:>7.1f} {r['seconds']:>10.2f}"
            f" {r['audio_s'] / r['seconds']:>12.0f} {r['peak_kib'] / 1024:>20.1f}"
            f" {r['pcm_bytes'] / 1e6:>8.1f}"
        )


if __name__ == "__main__":
    print_audio(measure())
