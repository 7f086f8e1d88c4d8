# Neutrino <-> inference engine protocol ("ie"), version 1.
#
# Transport: a UNIX stream socket carrying standard Cap'n Proto stream framing
# (segment table followed by segments, unpacked). Every frame is one Envelope.
# Frames larger than 101 MB (105,906,176 bytes) are refused by both sides.
#
# Multiplexing: every Envelope carries a requestId chosen by Neutrino; all
# frames that belong to one request carry the same id, so many requests share
# one connection. Connection-level frames (hello, ping) use requestId 0.
#
# Token ids travel as `Data`: packed little-endian uint32 arrays. Logprobs
# travel as packed little-endian float32 arrays. This keeps a streamed chunk
# to a handful of pointer reads instead of one conversion per list element.
#
# Lifecycle of a connection:
#   Neutrino -> engine : hello
#   engine -> Neutrino : helloAck (models, context lengths, capacity)
#   Neutrino -> engine : textQuery (requestId = N) ... cancel (requestId = N)
#   engine -> Neutrino : textResult* (last one has finishReason != none) | error
#   either side        : ping -> pong (same nonce)
# After an engine sends a final textResult or an error for a request it sends
# nothing more for that id. A cancel for an unknown or finished id is ignored.

@0xb2e4034349b88e22;

const protocolVersion :UInt16 = 1;
const maxFrameBytes :UInt64 = 105906176;

struct Envelope {
  version @0 :UInt16;
  requestId @1 :UInt64;

  body :union {
    hello @2 :Hello;
    helloAck @3 :HelloAck;
    textQuery @4 :TextQuery;
    textResult @5 :TextResult;
    cancel @6 :Cancel;
    error @7 :Error;
    ping @8 :Ping;
    pong @9 :Pong;
  }
}

struct Hello {
  client @0 :Text;            # e.g. "neutrino/0.1.0"
  protocolVersion @1 :UInt16;
}

struct HelloAck {
  engine @0 :Text;            # engine name and version
  protocolVersion @1 :UInt16;
  models @2 :List(ModelInfo);
  capacity @3 :UInt32;        # concurrent requests the engine accepts
}

struct ModelInfo {
  name @0 :Text;
  contextLength @1 :UInt32;   # prompt + completion tokens
  maxOutputTokens @2 :UInt32; # 0 = bounded by context only
}

struct Sampling {
  maxTokens @0 :UInt32;
  temperature @1 :Float32 = 1.0;
  topP @2 :Float32 = 1.0;
  topK @3 :Int32 = -1;        # -1 = disabled
  minP @4 :Float32;
  seed @5 :UInt64;
  hasSeed @6 :Bool;
  stopTokenIds @7 :Data;      # LE uint32; any of these ends generation
  logprobs @8 :Bool;
  topLogprobs @9 :UInt8;      # alternatives per token, 0..20
  presencePenalty @10 :Float32;
  frequencyPenalty @11 :Float32;
  repetitionPenalty @12 :Float32 = 1.0;
  ignoreEos @13 :Bool;
  minTokens @14 :UInt32;
}

struct TextQuery {
  model @0 :Text;
  promptTokens @1 :Data;      # LE uint32
  sampling @2 :Sampling;
  deadlineMs @3 :UInt32;      # 0 = none; engine may give up after this long
  traceparent @4 :Text;       # W3C trace context, may be empty
}

enum FinishReason {
  none @0;                    # more results follow
  stop @1;                    # an end-of-sequence or stop token was produced
  length @2;                  # maxTokens or the context was reached
  cancelled @3;               # a cancel frame was honoured
}

struct Timings {
  queueNs @0 :UInt64;         # time spent waiting in the engine's queue
  prefillNs @1 :UInt64;       # prompt processing
  decodeNs @2 :UInt64;        # generation so far
}

struct TextResult {
  tokens @0 :Data;            # LE uint32, new token ids in order
  logprobs @1 :Data;          # LE float32, one per token, empty unless asked
  topLogprobs @2 :UInt8;      # k alternatives per token
  topTokenIds @3 :Data;       # LE uint32, len(tokens) * k
  topTokenLogprobs @4 :Data;  # LE float32, len(tokens) * k
  finishReason @5 :FinishReason;
  stopTokenId @6 :UInt32;     # the token that stopped generation (finishReason stop)
  promptTokens @7 :UInt32;    # set on the final result
  cachedTokens @8 :UInt32;    # prompt tokens served from a prefix cache
  completionTokens @9 :UInt32;
  timings @10 :Timings;
}

struct Cancel {
  reason @0 :Text;            # e.g. "client disconnected", "timeout"
}

enum ErrorCode {
  internal @0;
  invalidRequest @1;
  unknownModel @2;
  overloaded @3;              # engine at capacity
  contextLength @4;
  unsupported @5;
  protocol @6;                # malformed frame or version mismatch
}

struct Error {
  code @0 :ErrorCode;
  message @1 :Text;
}

struct Ping {
  nonce @0 :UInt64;
}

struct Pong {
  nonce @0 :UInt64;
}
