"""Protocol-neutral checks of embedding and rerank inputs, shared by HTTP and gRPC."""

from __future__ import annotations

from neutrino.engine.messages import ModelInfo
from neutrino.errors import ErrorKind, NeutrinoError, bad_request
from neutrino.pipeline.models import ModelText

MAX_INPUTS = 2048  # embedding inputs per request
MAX_DOCUMENTS = 1000  # rerank documents per request


def checked_tokens(
    text: ModelText, info: ModelInfo, item: str | list[int], param: str
) -> list[int]:
    """Token ids of one input (text is encoded), checked against vocabulary and context."""
    ids = text.tokenizer.encode(item) if isinstance(item, str) else item
    vocab = text.tokenizer.vocab_size
    if any(t >= vocab for t in ids):
        raise bad_request(f"token ids must be below the vocabulary size {vocab}", param)
    if info.context_length and len(ids) > info.context_length:
        raise NeutrinoError(
            ErrorKind.CONTEXT_LENGTH,
            f"an input has {len(ids)} tokens; this model accepts {info.context_length}",
            param=param,
        )
    return ids
