"""The request bounds: ``[limits]``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from neutrino.config.checks import ConfigError as ConfigError

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    max_body_bytes: int = 8 * 1024 * 1024  # a request body past it: 413
    max_queue: int = 1024  # 0 = no queue: 429 at once when no slot is free
    max_inflight: int = 0  # 0 = sum of connected engines' capacity
    request_timeout_s: float = 120.0  # from receipt to end; past it the request fails (408/504)
    # Bytes a streaming client may leave unread before it is dropped.
    stream_buffer_bytes: int = 4 * 1024 * 1024
    history_size: int = 1000  # ended requests /neutrino/v1/history keeps
    history_bytes: int = 2 * 1024 * 1024  # the history ring's size in bytes, roughly
    max_n: int = 8  # choices one request may ask for (n)
    max_stop_sequences: int = 16  # stop strings one request may give
    max_stop_chars: int = 1024  # length of each stop string
    # A JSON schema (response_format, structured outputs) nested deeper is refused.
    max_schema_depth: int = 64
    # logit_bias entries one request may give.
    max_logit_bias: int = 1024
    # n * max_tokens * (1 + top_logprobs) of a non-streamed request: the tokens and
    # alternatives its one answer may hold (a stream is paced by its client). Past it a
    # request is refused; one that names no max_tokens gets fewer tokens instead.
    max_unstreamed_tokens: int = 1 << 20
    # A request body larger than this is decoded and checked on a worker thread.
    offload_bytes: int = 64 * 1024
    # JSON objects and arrays one body may hold (counted while a dense body is decoded).
    max_json_containers: int = 100_000
    # Messages and tools one chat request may give (OpenAI's bounds).
    max_messages: int = 2048
    max_tools: int = 128
    # An audio upload's form (transcriptions, translations) may be this large: OpenAI's
    # file limit, 25 MB (other bodies: max_body_bytes).
    max_upload_bytes: int = 25 * 1024 * 1024
    # The longest audio one transcription or translation may send, decoded (a file that
    # holds more is refused as it decodes); 1,800 s at 16 kHz is 58 MB of samples.
    max_audio_seconds: float = 1800.0
    # Longest a write to a client may wait for it to read (HTTP/1.0 and speech streams,
    # gRPC streams); past it the client is dropped and its engine request cancelled.
    send_timeout_s: float = 60.0
    # The queue's fair shares (docs/limits.md): a queued request gains a priority level
    # per this long waited (0: no ageing); a key's tokens weigh half after share_decay_s.
    priority_age_s: float = 30.0
    share_decay_s: float = 60.0
    # The last this many free engine slots go only to keys with no request in flight: a
    # key's request need not wait for another key's running answer to end (0: every slot
    # to whoever is next; the busy keys cannot use them while no other key comes).
    reserved_slots: int = 0
    # The highest priority a request may ask for (x-neutrino-priority) when keys are off.
    unkeyed_max_priority: int = 0
    # The answer's tokens a request is charged at admission when it names no max_tokens
    # (corrected at its end), in fair shares and tokens-per-minute limits.
    answer_estimate_tokens: int = 256
    # Where per-key request and token counters are shared by every worker and instance
    # (redis://host:port/db; "": each process counts its own).
    redis: str = ""
    # The per-minute limits count in fixed windows this long, each allowed its share of
    # the minute's (60: the minute itself; 10: a sixth in every ten seconds, fewer bursts).
    rate_window_s: int = 60
