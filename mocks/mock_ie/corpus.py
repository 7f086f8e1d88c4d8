"""The built-in prose the mock engine draws its default replies from.

Plain English written for this project, with a little non-ASCII (accents, an emoji,
Chinese and Japanese) so that multi-byte UTF-8 detokenization is exercised. Words are
split on single spaces; paragraph breaks stay attached to their words.
"""

from __future__ import annotations

from typing import Final

TEXT: Final = "\n\n".join(
    [
        "The morning fog rolled slowly over the harbor while the fishing boats waited for"
        " the tide. A small café near the pier opened its shutters, and the smell of fresh"
        " bread drifted down the narrow street. Marta, who had run the place for thirty"
        " years, liked to say that every good day starts with warm coffee and one kind"
        " word. Her grandson thought that was a naïve idea, but he came every morning"
        " anyway and sat by the window with his notebook. ☕",
        "He was learning to write programs that answer questions. The idea fascinated him:"
        " a machine that reads a few words, guesses what comes next, and keeps guessing"
        " until a whole answer appears on the screen. Marta did not trust it. She asked"
        " whether the machine knew the price of flour, or the name of the dog that slept"
        " under the third table. He admitted that it did not, and she laughed so loudly"
        " that the sailors at the counter turned around. 🙂",
        "Later that week a traveler arrived from Kyoto with a small wooden box. Inside were"
        " tea leaves and a card that read 雨の日も楽しい, which he translated as rainy days"
        " are pleasant too. He ordered a crème brûlée, paid with coins from three different"
        " countries, and told stories about mountains, trains, and a market where the"
        " vendors greeted everyone with 你好 and a smile. The grandson wrote down every"
        " word, because good stories are worth more than perfect grammar.",
        "When the rain finally came, the streets emptied and the harbor turned grey. Inside"
        " the café the lamps were warm and the radio played an old song about the sea."
        " Someone counted the umbrellas by the door: there were eleven, one of them"
        " bright yellow. The dog stretched, yawned, and moved closer to the stove. Nobody"
        " was in a hurry, and for an hour the whole town seemed to breathe more slowly.",
        "By evening the clouds had drifted east. The boats went out again, their lights"
        " blinking on the dark water like a string of small stars. Marta wiped the tables,"
        " counted the day's money twice, and left a bowl of water for the dog. Her grandson"
        " closed his notebook and said that tomorrow he would teach the machine about"
        " flour, umbrellas, and kind words. She told him to start with the kind words,"
        " since those were the hardest to learn and the easiest to forget.",
        "Years afterwards people still talked about that winter, the traveler with his"
        " tea, and the boy who wrote everything down. The café changed its sign, its"
        " chairs, and its prices, but the window seat stayed where it was. On foggy"
        " mornings someone always sat there, reading or writing or simply watching the"
        " water, and waiting, without any particular reason, for the tide to turn.",
    ]
)

WORDS: Final[tuple[str, ...]] = tuple(TEXT.split(" "))


def passage(offset: int, count: int) -> str:
    """``count`` words starting at word ``offset``, wrapping around the corpus."""
    n = len(WORDS)
    start = offset % n
    words = [WORDS[(start + i) % n] for i in range(count)]
    return " ".join(words)
