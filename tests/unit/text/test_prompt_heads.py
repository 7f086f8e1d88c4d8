"""Prompt heads (``segments.PrefixCache`` in the tiktoken tokenizers' ``encode_prompt``):
a conversation's next turn reuses the ids of the previous turn's prompt up to its last
special token, and its ids are exactly a full tokenization's, for every byte-level
family, however the new text meets the head (merges at the boundary included); a head
whose end is not followed by a special token is not used; the memory is bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.registry import available_tokenizers, load_tokenizer
from neutrino.text.segments import ENTRY_BYTES, ID_BYTES, PrefixCache
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer

LONG = "You are a careful assistant. " * 120  # past the cache's 2,048-character minimum
# Text that BPE likes to merge across a seam: spaces, newlines, digits, letters, CJK.
PIECE = st.text(alphabet=st.sampled_from(list(" \n\tab1é中😀.")), min_size=0, max_size=30)


def _heads_tokenizers() -> list[TiktokenTokenizer]:
    out = []
    for name in available_tokenizers():
        tok = load_tokenizer(name)
        if isinstance(tok, TiktokenTokenizer) and tok._prefixes is not None:
            out.append(tok)
    return out


TOKENIZERS = _heads_tokenizers()


def _markers(tok: TiktokenTokenizer) -> tuple[str, str]:
    """Two special tokens of ``tok`` to play turn start and end."""
    specials = sorted(tok.special_tokens, key=tok.special_tokens.__getitem__)
    return specials[0], specials[-1]


def test_some_families_keep_prompt_heads() -> None:
    names = {t.name for t in TOKENIZERS}
    assert "qwen2" in names  # the families below are at least these


@settings(max_examples=40, deadline=None)
@given(turns=st.lists(st.tuples(PIECE, PIECE), min_size=1, max_size=6), index=st.integers(0, 99))
def test_a_conversation_turn_by_turn_encodes_as_a_whole(
    turns: list[tuple[str, str]], index: int
) -> None:
    tok = TOKENIZERS[index % len(TOKENIZERS)]
    start, end = _markers(tok)
    tok.clear_caches()
    history = f"{start}system\n{LONG}{end}\n"
    for question, answer in turns:
        prompt = f"{history}{start}user\n{question}{end}\n{start}assistant\n"
        assert tok.encode_prompt(prompt) == tok.encode(prompt), tok.name
        history = f"{prompt}{answer}{end}\n"  # the answer joins the head's last piece


@settings(max_examples=40, deadline=None)
@given(tail=PIECE, index=st.integers(0, 99))
def test_a_head_not_followed_by_a_special_is_not_used(tail: str, index: int) -> None:
    """The head ends where the earlier prompt had a special token; a text that goes on
    with plain text there must be tokenized across that seam."""
    tok = TOKENIZERS[index % len(TOKENIZERS)]
    start, end = _markers(tok)
    tok.clear_caches()
    head = f"{start}system\n{LONG}word"
    tok.encode_prompt(f"{head}{end}")  # remembers the head
    assert tok.encode_prompt(head + tail) == tok.encode(head + tail)
    assert tok.encode_prompt(f"{head}{end}{tail}") == tok.encode(f"{head}{end}{tail}")


def test_results_are_not_shared_with_the_cache() -> None:
    tok = load_tokenizer("qwen2")
    assert isinstance(tok, TiktokenTokenizer)
    tok.clear_caches()
    prompt = f"<|im_start|>system\n{LONG}<|im_end|>\n<|im_start|>assistant\n"
    first = tok.encode_prompt(prompt)
    first.append(0)  # a caller changing its list must not change the cache
    again = tok.encode_prompt(prompt + "more")
    assert again == tok.encode(prompt + "more")


def test_the_memory_is_bounded_and_an_extended_head_replaces_its_own() -> None:
    text = "x" * 3000
    one = ENTRY_BYTES + 3000 + ID_BYTES * 10
    cache = PrefixCache(max_bytes=2 * one + 1, min_chars=100)
    cache.put(text, list(range(10)))
    first = cache.find(text + "!", [3000])
    assert first is not None and first.text == text
    cache.put("y" * 3000, list(range(10)))
    assert len(cache) == 2 and cache.nbytes == 2 * one
    cache.put("z" * 3000, list(range(10)))  # over budget: the oldest goes
    assert cache.find(text, [3000]) is None and len(cache) == 2
    longer = "z" * 3000 + "w" * 10
    z = cache.find(longer, [3000])
    assert z is not None
    cache.extend(z, longer, [])  # extends z: z goes, and y for the room
    assert cache.find("z" * 3000, [3000]) is None and len(cache) == 1
    assert cache.find(longer + "?", [3010]) is not None
    assert cache.find(longer + "?", [3000]) is None  # no special token at its end
    cache.put("s" * 50, [1])  # under min_chars: not kept
    assert len(cache) == 1


def test_an_extended_heads_ids_grow_in_place_once_then_are_copied() -> None:
    """A head's successor shares its list (readers take only their first n); a second
    successor of the same head, while the first holds the list, gets a copy."""
    cache = PrefixCache(min_chars=10)
    head_text = "h" * 20
    cache.put(head_text, [1, 2, 3])
    head = cache.find(head_text + "!", [20])
    assert head is not None
    cache.extend(head, head_text + "a" * 5, [4, 5])
    first = cache.find(head_text + "a" * 5 + "!", [25])
    assert first is not None and first.ids is head.ids
    assert first.ids[: first.n] == [1, 2, 3, 4, 5] and head.ids[: head.n] == [1, 2, 3]
    cache.extend(head, head_text + "b" * 5, [6])  # the same head, another way on
    second = cache.find(head_text + "b" * 5 + "!", [25])
    assert second is not None and second.ids is not head.ids
    assert second.ids[: second.n] == [1, 2, 3, 6]
    assert first.ids[: first.n] == [1, 2, 3, 4, 5]
