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
#                        (tokenBatch frames may carry the plain mid-stream results)
#   either side        : ping -> pong (same nonce)
# After an engine sends a final textResult or an error for a request it sends
# nothing more for that id. A cancel for an unknown or finished id is ignored.
#
# Token batches: a continuous-batching engine produces one token for each running
# request per decoding step. When the client's hello sets tokenBatches, the engine
# may send those plain results (token ids only: no finish reason, counts, logprobs
# or timings) of many requests as one tokenBatch frame (requestId 0) instead of
# one textResult frame each. Entry i stands for a textResult with finishReason
# none carrying the next tokenCounts[i] ids of `tokens` for requestIds[i]; the
# entries of one request keep their order with respect to that request's other
# frames. Anything richer (a finish, logprobs, counts) is sent as a textResult.

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
    embedQuery @10 :EmbedQuery;
    embedResult @11 :EmbedResult;
    rerankQuery @12 :RerankQuery;
    rerankResult @13 :RerankResult;
    audioQuery @14 :AudioQuery;
    audioResult @15 :AudioResult;
    speechQuery @16 :SpeechQuery;
    speechResult @17 :SpeechResult;
    detectQuery @18 :DetectQuery;
    detectResult @19 :DetectResult;
    tokenBatch @20 :TokenBatch;
    loadModel @21 :ModelControl;        # client -> engine: load it; the reply carries this id
    unloadModel @22 :ModelControl;      # client -> engine: unload it; the reply carries this id
    modelsChanged @23 :ModelsChanged;   # engine -> client: its models now (a load's or unload's
                                        # reply under that request's id; else id 0)
  }
}

struct Hello {
  client @0 :Text;            # e.g. "neutrino/0.1.0"
  protocolVersion @1 :UInt16;
  tokenBatches @2 :Bool;      # the client accepts tokenBatch frames
  token @3 :Text;             # the shared secret of an engine listening on TCP ("" on a
                              # UNIX socket, whose file mode says who may connect)
}

struct HelloAck {
  engine @0 :Text;            # engine name and version
  protocolVersion @1 :UInt16;
  models @2 :List(ModelInfo);
  capacity @3 :UInt32;        # concurrent requests the engine accepts
  memoryBudget @4 :UInt64;    # bytes its loaded models may take (0: it loads and unloads none)
  continues @5 :Bool;         # it honours TextQuery.forcedTokens (answers moved to it go on)
  continuesGuided @6 :Bool;   # ... for guided queries too, the constraint advanced over them
                              # (else a guided answer is not moved to it)
}

struct ModelInfo {
  name @0 :Text;
  contextLength @1 :UInt32;   # prompt + completion tokens
  maxOutputTokens @2 :UInt32; # 0 = bounded by context only
  capabilities @3 :List(Capability);  # empty = [generate]
  embeddingDimensions @4 :UInt32;     # native size of embed vectors (embed models)
  state @5 :ModelState;               # loaded unless the engine loads models on demand
  sizeBytes @6 :UInt64;               # what it takes loaded (against memoryBudget)
  audioSampleRate @7 :UInt32;         # transcribe models: the rate their audio must have
                                      # (Neutrino resamples to it); 0 = any rate
}

enum Capability {
  generate @0;                # textQuery -> textResult
  vision @1;                  # textQuery may carry images
  embed @2;                   # embedQuery -> embedResult
  rerank @3;                  # rerankQuery -> rerankResult
  transcribe @4;              # audioQuery -> audioResult (transcribe and translate)
  speech @5;                  # speechQuery -> speechResult*
  detect @6;                  # detectQuery -> detectResult
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
  images @5 :List(Image);     # images referenced by the prompt, in order
  guided @6 :Guided;          # constraints on the output the engine must decode under
  forcedTokens @7 :Data;      # LE uint32: the answer so far, generated by another replica
                              # (a migrated request): the engine takes them as its own
                              # output, after the prompt, and goes on from there: they count
                              # in maxTokens, minTokens and completionTokens, the guided
                              # constraint and penalties are advanced over them, and they
                              # are not sent back. Only sent to an engine whose helloAck
                              # sets continues.
}

struct Guided {
  mode @0 :GuidedMode;
  jsonSchema @1 :Text;        # mode jsonSchema: the JSON Schema, serialised
  choices @2 :List(Text);     # mode choice: the output is exactly one of these
  pattern @3 :Text;           # mode regex: a regular expression the whole output matches;
                              # mode grammar: the grammar (GBNF, EBNF or Lark) it derives from
}

# An engine must refuse (error code unsupported) a mode it cannot decode under, never
# ignore it: a client asked for that constraint.
enum GuidedMode {
  none @0;
  jsonObject @1;              # any JSON object
  jsonSchema @2;              # a JSON value valid against jsonSchema
  choice @3;                  # one of choices, verbatim
  regex @4;                   # text matching pattern
  grammar @5;                 # text derived from the grammar in pattern
}

struct Image {
  data @0 :Data;              # the encoded image as the client sent it (checked by Neutrino)
  mimeType @1 :Text;          # "image/png", "image/jpeg"
  width @2 :UInt32;
  height @3 :UInt32;
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

struct TokenBatch {
  requestIds @0 :Data;        # LE uint64, one per entry
  tokenCounts @1 :Data;       # LE uint32, one per entry: how many of `tokens` it takes
  tokens @2 :Data;            # LE uint32, the entries' token ids, entry after entry
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
  message @1 :Text;           # shown to the client for the codes that blame the request
                              # (invalidRequest … unsupported); logged only for internal
                              # and protocol, whose clients get a fixed text
}

struct Ping {
  nonce @0 :UInt64;
}

struct Pong {
  nonce @0 :UInt64;
  # The engine's load as it sees it, from every client (0: not reported): requests it is
  # running, requests waiting for a slot, and the share of its KV cache in use (0 to 1).
  # The router adds them to its own counts (an engine shared by several front ends).
  running @1 :UInt32;
  waiting @2 :UInt32;
  cacheUsage @3 :Float32;
}

# ----------------------------------------------------------------------------- modalities
#
# Each query below is answered by its result (speech: a stream of results, the last with
# final = true) or by an error; a cancel ends any of them. Token ids are packed LE uint32
# `Data`, vectors and scores packed LE float32, audio 16-bit LE mono PCM.

struct EmbedQuery {
  model @0 :Text;
  inputs @1 :List(Data);      # one token id array per input
  dimensions @2 :UInt32;      # 0 = the model's own size; else truncate (Matryoshka)
  normalize @3 :Bool = true;  # L2-normalise each vector
  traceparent @4 :Text;
}

struct EmbedResult {
  dimensions @0 :UInt32;
  vectors @1 :Data;           # LE float32, len(inputs) * dimensions, row-major
  promptTokens @2 :UInt32;
}

struct RerankQuery {
  model @0 :Text;
  query @1 :Data;             # token ids
  documents @2 :List(Data);   # token ids per document
  traceparent @3 :Text;
}

struct RerankResult {
  scores @0 :Data;            # LE float32, one per document, in input order
  promptTokens @1 :UInt32;
}

enum AudioTask {
  transcribe @0;              # text in the spoken language
  translate @1;               # English text
}

struct AudioQuery {
  model @0 :Text;
  task @1 :AudioTask;
  pcm @2 :Data;               # 16-bit LE mono PCM, decoded and checked by Neutrino
  sampleRate @3 :UInt32;
  language @4 :Text;          # ISO-639-1 hint, may be empty
  promptTokens @5 :Data;      # optional context to condition on
  temperature @6 :Float32;
  maxTokens @7 :UInt32;
  traceparent @8 :Text;
}

struct AudioSegment {
  startS @0 :Float32;
  endS @1 :Float32;
  tokens @2 :Data;            # token ids of this segment's text
}

struct AudioResult {
  language @0 :Text;
  durationS @1 :Float32;
  segments @2 :List(AudioSegment);
  completionTokens @3 :UInt32;
}

struct SpeechQuery {
  model @0 :Text;
  text @1 :Text;              # what to say
  voice @2 :Text;
  sampleRate @3 :UInt32;      # 0 = the model's own
  speed @4 :Float32 = 1.0;
  traceparent @5 :Text;
}

struct SpeechResult {
  pcm @0 :Data;               # 16-bit LE mono PCM chunk
  sampleRate @1 :UInt32;
  final @2 :Bool;             # the last chunk (may be empty)
}

struct DetectQuery {
  model @0 :Text;
  image @1 :Image;
  threshold @2 :Float32;      # minimum score to report
  traceparent @3 :Text;
}

struct Box {
  label @0 :Text;
  score @1 :Float32;
  x0 @2 :Float32;             # pixels, top-left origin
  y0 @3 :Float32;
  x1 @4 :Float32;
  y1 @5 :Float32;
}

struct DetectResult {
  boxes @0 :List(Box);
}

enum ModelState {
  loaded @0;
  unloaded @1;                # known to the engine; a loadModel brings it in
  loading @2;
}

struct ModelControl {
  name @0 :Text;
}

struct ModelsChanged {
  models @0 :List(ModelInfo); # every model the engine knows, with its state
}
