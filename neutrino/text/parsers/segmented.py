"""The base class of the tool parsers that find call blocks in plain content.

Subclassed by every tool parser but ``harmony`` and ``forced``, directly or through
:mod:`~neutrino.text.parsers.blocks` and :mod:`~neutrino.text.parsers.sectioned`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from neutrino.text.parsers.base import (
    Call,
    CallIds,
    Delta,
    JsonScanner,
    TextSegments,
    ToolParser,
    find_first,
)

__all__ = ["SegmentedToolParser"]


class SegmentedToolParser(ToolParser):
    """Base of the tool parsers that find call blocks in plain content.

    It holds what the subclasses share: the text kept for the next chunk (a suffix that may
    begin a marker), the content around the blocks (:class:`TextSegments`), the whitespace held
    before the current block, the text of a block still being decided (``_raw``: emitted
    verbatim if the block is not a call; a JSON value in it is scanned as it arrives), and a
    state number, 0 at the start. A subclass consumes text in :meth:`_scan`; the end of the
    stream is settled by :meth:`_flush`, whose default suits a subclass whose state 0 is plain
    content and whose other states are inside a block.
    """

    __slots__ = ("_buf", "_held", "_json_at", "_raw", "_scanner", "_segments", "_state")

    def __init__(
        self, *, tools: Sequence[Mapping[str, object]] | None = None, id_prefix: CallIds = "call_"
    ) -> None:
        super().__init__(tools=tools, id_prefix=id_prefix)
        self._buf = ""
        self._state = 0
        self._segments = TextSegments()
        self._held = ""
        self._raw: list[str] = []
        self._scanner = JsonScanner()
        self._json_at = 0

    def feed(self, text: str) -> Delta:
        out = Delta()
        self._buf = self._scan(out, self._buf + text if self._buf else text)
        return out

    def finish(self) -> Delta:
        out = Delta()
        buf, self._buf = self._buf, ""
        self._flush(out, buf)
        self._segments.finish(out)
        return out

    @abc.abstractmethod
    def _scan(self, out: Delta, buf: str) -> str:
        """Consume ``buf`` (the text kept from before plus the new chunk); what to keep."""

    def _flush(self, out: Delta, buf: str) -> None:
        """End of stream: settle the kept text ``buf`` and any block still open.

        By default, in state 0 ``buf`` is content; in any other state it ends the open block,
        which :meth:`_cut` settles.
        """
        if self._state == 0:
            self._segments.text(out, buf)
        else:
            self._raw.append(buf)
            self._cut(out)

    def _cut(self, out: Delta) -> None:
        """The stream ended inside a block (its text all in ``_raw``); by default it is no call."""
        self._fail(out)

    def _fail(self, out: Delta) -> None:
        """The open block is not a call (or the stream ended inside one that gives none):
        its text is content, verbatim, as nothing the model wrote may be lost (after a
        call: dropped, as all text after a call is); plain content follows (state 0)."""
        self._end_block(out, None)
        self._state = 0

    def _open_block(self, *raw: str) -> None:
        """A (possible) block starts; ``raw`` is its text so far."""
        self._held = self._segments.open_block()
        self._raw = list(raw)

    def _end_block(
        self, out: Delta, calls: Sequence[Call] | None, raw: Sequence[str] | None = None
    ) -> None:
        """The block ended: its ``calls`` are emitted, or, when it held none (``None``), its
        text is content (the pieces ``raw`` if given, else the held ``_raw``)."""
        text = self._raw if raw is None else raw
        self._raw = []
        if calls is None:
            self._segments.block_failed(out, self._held, "".join(text))
            return
        for name, arguments in calls:
            self._add_call(out, name, arguments)
        self._segments.block_done(called=bool(calls))

    def _skip_space(self, buf: str) -> str:
        """``buf`` without its leading whitespace, which joins the block's text."""
        stripped = buf.lstrip()
        self._raw.append(buf[: len(buf) - len(stripped)])
        return stripped

    def _take_until(self, buf: str, marker: str) -> tuple[str, bool]:
        """The text of ``buf`` before ``marker`` joins the block's text.

        Returns ``(rest, found)``: the text after the marker when it was found, else the
        suffix that may still begin one (to be kept for the next chunk).
        """
        at, found = find_first(buf, (marker,))
        if at:
            self._raw.append(buf[:at])
        if found is None:
            return buf[at:], False
        return buf[at + len(marker) :], True

    def _start_json(self) -> None:
        """A JSON object or array starts here in the block's text."""
        self._scanner = JsonScanner()
        self._json_at = len(self._raw)

    def _take_json(self, buf: str) -> int:
        """The text of ``buf`` up to the end of the JSON value joins the block's text.

        Returns the index just past the value, or -1 when it goes on (all of ``buf`` taken).
        """
        end = self._scanner.scan(buf)
        self._raw.append(buf if end < 0 else buf[:end])
        return end

    def _json_text(self) -> str:
        """The text of the JSON value since :meth:`_start_json`."""
        return "".join(self._raw[self._json_at :])
