"""Audio in the formats OpenAI's API takes and gives, through PyAV (FFmpeg's libraries, which
its wheels carry).

:func:`decode_upload` turns an uploaded file into what the engine protocol carries, 16-bit
little-endian mono PCM and its rate: WAV through :mod:`neutrino.audio.wav` (exact, no
FFmpeg), and flac, mp3, mp4/m4a, mpeg/mpga, ogg and webm through PyAV, resampled (and mixed
down) to the rate asked for, or kept at the file's own. It is bounded like every other
input: only those containers and the audio codecs they carry are opened (``CONTAINERS``,
``CODECS``); the decoded audio may be at most ``max_seconds`` long, counted as it decodes
(a file that claims less and holds more is stopped there); a decode runs at most
``max_decode_s`` (checked between packets, each a bounded piece of the file); a file that is
truncated, corrupt or holds no audio is an :class:`AudioError`, whose message is the
client's.

:class:`SpeechEncoder` turns the engine's PCM chunks into a stream of one of OpenAI's speech
formats, as they come: ``wav`` and ``pcm`` as they are, ``mp3`` (LAME), ``opus`` (Ogg Opus,
at 48 kHz), ``aac`` (ADTS) and ``flac``.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from typing import Any, Final

from neutrino.audio.wav import MAX_RATE, MIN_RATE, Audio, WavError, read_wav, wav_header

__all__ = ["CODECS", "CONTAINERS", "SPEECH_FORMATS", "AudioError", "SpeechEncoder", "decode_upload"]

# FFmpeg's names of the demuxers that read OpenAI's upload formats: flac, mp3 (and mpga,
# MPEG audio), mp4 and m4a (the ISO family), mpeg (program streams), ogg, webm, wav.
CONTAINERS: Final = frozenset({"flac", "mp3", "mov", "mp4", "m4a", "mpeg", "ogg", "matroska",
                               "webm", "wav", "aac"})  # fmt: skip
# The audio codecs those carry.
CODECS: Final = frozenset({"mp3", "mp3float", "mp2", "mp2float", "aac", "alac", "flac", "opus",
                           "vorbis", "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le",
                           "pcm_u8", "pcm_s16be", "pcm_alaw", "pcm_mulaw"})  # fmt: skip
ACCEPTED: Final = "flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav or webm audio"


class AudioError(ValueError):
    """An upload that cannot be decoded as audio here; the message is the client's."""


def _av() -> Any:
    """PyAV, imported on first use (FFmpeg's libraries take ~70 ms and tens of MB to load:
    a server that serves no audio never pays for them)."""
    import av

    return av


def decode_upload(
    data: bytes, *, rate: int = 0, max_seconds: float, max_decode_s: float = 30.0
) -> Audio:
    """``data`` as 16-bit mono PCM at ``rate`` (0: the file's own)."""
    if not data:
        raise AudioError("the file is empty")
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        try:
            audio = read_wav(data)
        except WavError as exc:
            raise AudioError(str(exc)) from None
        _check_length(len(audio.pcm) // 2, audio.sample_rate, max_seconds)
        if rate and rate != audio.sample_rate:
            return resample(audio, rate)
        return audio
    av = _av()
    try:
        return _decode(av, data, rate, max_seconds, max_decode_s)
    except av.error.FFmpegError as exc:
        raise AudioError(f"the file could not be decoded as {ACCEPTED}: {exc.strerror}") from None
    except (ValueError, IndexError, EOFError) as exc:
        if isinstance(exc, AudioError):
            raise
        raise AudioError(f"the file could not be decoded as {ACCEPTED}") from None


def _decode(av: Any, data: bytes, rate: int, max_seconds: float, max_decode_s: float) -> Audio:
    deadline = time.monotonic() + max_decode_s
    with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore") as container:
        names = set(container.format.name.split(","))
        if not names & CONTAINERS:
            raise AudioError(f"the file is {container.format.long_name}; send {ACCEPTED}")
        if not container.streams.audio:
            raise AudioError("the file holds no audio stream")
        stream = container.streams.audio[0]
        codec = stream.codec_context.name
        if codec not in CODECS:
            raise AudioError(f"the file's audio is {codec}, not read here; send {ACCEPTED}")
        source = stream.codec_context.sample_rate or 0
        out_rate = rate or source
        if not MIN_RATE <= out_rate <= MAX_RATE:
            raise AudioError(
                f"the audio's sample rate ({out_rate} Hz) must be {MIN_RATE} to {MAX_RATE} Hz"
            )
        stream.codec_context.thread_type = "SLICE"  # no frame threads: its work stays here
        resampler = av.AudioResampler(format="s16", layout="mono", rate=out_rate)
        limit = int(max_seconds * out_rate)
        out = bytearray()
        for frame in _frames(container, stream, deadline):
            for piece in resampler.resample(frame):
                _take(out, piece)
            if len(out) // 2 > limit:
                raise AudioError(f"the audio is longer than {max_seconds:g} seconds")
        for piece in resampler.resample(None):
            _take(out, piece)
    samples = len(out) // 2
    if not samples:
        raise AudioError("the file holds no audio that could be decoded (truncated or empty?)")
    _check_length(samples, out_rate, max_seconds)
    return Audio(bytes(out), out_rate)


def _frames(container: Any, stream: Any, deadline: float) -> Iterator[Any]:
    """The stream's decoded frames; stopped between packets past ``deadline``."""
    for packet in container.demux(stream):
        if time.monotonic() > deadline:
            raise AudioError("the file took too long to decode")
        yield from packet.decode()


def _take(out: bytearray, frame: Any) -> None:
    out += memoryview(frame.planes[0])[: 2 * frame.samples]


def _check_length(samples: int, rate: int, max_seconds: float) -> None:
    if samples > max_seconds * rate:
        raise AudioError(f"the audio is longer than {max_seconds:g} seconds")


def resample(audio: Audio, rate: int) -> Audio:
    """16-bit mono PCM at another rate."""
    if audio.sample_rate == rate:
        return audio
    av = _av()
    resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
    out = bytearray()
    step = 1 << 16  # samples per frame handed to the resampler
    pcm = memoryview(audio.pcm)
    for start in range(0, len(pcm) // 2, step):
        chunk = pcm[2 * start : 2 * (start + step)]
        for piece in resampler.resample(_frame(av, chunk, audio.sample_rate)):
            _take(out, piece)
    for piece in resampler.resample(None):
        _take(out, piece)
    return Audio(bytes(out), rate)


def _frame(av: Any, pcm: bytes | memoryview, rate: int) -> Any:
    frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
    frame.planes[0].update(bytes(pcm))
    frame.sample_rate = rate
    return frame


# ----------------------------------------------------------------------------- speech out

# format -> (container, codec, the rate it is encoded at: 0 = the engine's), content type
SPEECH_FORMATS: Final[dict[str, tuple[str, str, int, str]]] = {
    "wav": ("", "", 0, "audio/wav"),
    "pcm": ("", "", 0, "audio/pcm"),
    "mp3": ("mp3", "libmp3lame", 0, "audio/mpeg"),
    "opus": ("ogg", "libopus", 48000, "audio/opus"),
    "aac": ("adts", "aac", 0, "audio/aac"),
    "flac": ("flac", "flac", 0, "audio/flac"),
}
_MP3_RATES: Final = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)


class _Sink:
    """Where the muxer writes: a buffer taken after each step (a stream, no seeking)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self.parts)
        self.parts.clear()
        return out


class SpeechEncoder:
    """16-bit mono PCM at ``rate`` in, bytes of ``fmt`` out, chunk by chunk (sans-IO)."""

    def __init__(self, fmt: str, rate: int) -> None:
        container, codec, fixed, self.content_type = SPEECH_FORMATS[fmt]
        self.fmt = fmt
        self.rate = rate
        self._head = wav_header(rate) if fmt == "wav" else b""
        self._av: Any = None
        if container:
            av = self._lib = _av()
            out_rate = fixed or (rate if codec != "libmp3lame" else _nearest(rate, _MP3_RATES))
            self._sink = _Sink()
            # bitexact: the same audio gives the same bytes (no random Ogg serial number)
            self._av = av.open(self._sink, "w", format=container, options={"fflags": "+bitexact"})
            self._stream = self._av.add_stream(codec, rate=out_rate, layout="mono")
            ctx = self._stream.codec_context
            self._resampler = av.AudioResampler(
                format=ctx.format.name, layout="mono", rate=out_rate
            )
            self._fifo = av.AudioFifo()
            self._frame_size = ctx.frame_size or 1024

    def feed(self, pcm: bytes) -> bytes:
        """The bytes ``pcm`` adds to the stream (possibly none yet)."""
        if self._av is None:
            head, self._head = self._head, b""
            return head + pcm
        if pcm:
            for piece in self._resampler.resample(_frame(self._lib, pcm, self.rate)):
                self._fifo.write(piece)
            self._drain(self._frame_size)
        return self._sink.take()

    def encode(self, pcm: bytes, last: bool) -> bytes:
        """``feed``, and ``finish`` after it where ``pcm`` is the stream's last audio."""
        out = self.feed(pcm)
        return out + self.finish() if last else out

    def finish(self) -> bytes:
        """The stream's last bytes (the encoder's tail, the container's trailer)."""
        if self._av is None:
            head, self._head = self._head, b""
            return head
        for piece in self._resampler.resample(None):
            self._fifo.write(piece)
        self._drain(self._frame_size)
        if self._fifo.samples:
            self._mux(self._fifo.read())
        self._mux(None)
        self._av.close()
        return self._sink.take()

    def _drain(self, size: int) -> None:
        while self._fifo.samples >= size:
            self._mux(self._fifo.read(size))

    def _mux(self, frame: Any) -> None:
        for packet in self._stream.encode(frame):
            self._av.mux(packet)


def _nearest(rate: int, rates: tuple[int, ...]) -> int:
    return min(rates, key=lambda r: (abs(r - rate), r))
