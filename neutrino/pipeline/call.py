"""One modality request in flight (embeddings, rerank, audio, speech, detection).

The counterpart of :class:`~neutrino.pipeline.generation.Generation` for queries
answered by whole results rather than a token stream: it is the engine sink, owns
the request's lifecycle, its timeout and its single cancel, and gives the front
end the results in order (``wait``/``take``, or ``result()`` for one answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from neutrino.engine.client import Submission
from neutrino.engine.messages import ModalResult, TextResult, is_final
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.admission import OPEN, Ticket
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.deadlines import Deadline, DeadlineWheel
from neutrino.pipeline.history import Spent
from neutrino.pipeline.observe import Observed
from neutrino.pipeline.state import Lifecycle, State


class ModalCall:
    def __init__(
        self,
        *,
        request_id: str,
        model: str,
        prompt_tokens: int,
        lifecycle: Lifecycle,
        on_done: Callable[[ModalCall], None],
    ) -> None:
        self.request_id = request_id
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.lifecycle = lifecycle
        self.created = int(lifecycle.created_wall)
        self._on_done = on_done
        self._pending: list[ModalResult] = []
        self._finished = False
        self._error: NeutrinoError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._submission: Submission | None = None
        self._timer: Deadline | None = None
        self.principal: Principal | None = None  # the API key it counts against
        self.ticket: Ticket = OPEN  # its place in the fair shares and its key\'s limits
        self.obs: Observed | None = None  # its labels and span, for metrics and tracing
        self.route = ""  # how a manifest route sent it here (pipeline/routes.py Hop)
        self.hops: list[tuple[str, str]] | None = None  # never: only text answers move

    def spent(self) -> Spent:
        """Its prompt tokens (a modality call generates none); "stop" once complete."""
        done = self.lifecycle.state is State.COMPLETE
        return Spent(self.prompt_tokens, finish_reason="stop" if done else None)

    def attach(self, submission: Submission, timeout_s: float, deadlines: DeadlineWheel) -> None:
        self._submission = submission
        if not self.lifecycle.terminal:
            self._timer = deadlines.call_later(timeout_s, self._on_timeout)

    # ------------------------------------------------------------------ engine side

    def on_modal(self, result: ModalResult) -> None:
        if self.lifecycle.terminal:
            return
        if self.lifecycle.state is State.PROCESSING:
            self.lifecycle.advance(State.GENERATING)
        self._pending.append(result)
        if is_final(result):
            self._finished = True
            self._end(State.COMPLETE)
        self._wake()

    def on_result(self, result: TextResult) -> bool:
        raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered wrongly")

    def on_moved(self, engine: str, reason: str) -> None:
        """Never: only text answers move (engine/fleet/migration.py)."""

    def on_tokens(self, tokens: list[int]) -> bool:
        raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered wrongly")

    def on_error(self, error: NeutrinoError) -> None:
        if self.lifecycle.terminal:
            return
        self._error = error
        self._end(State.FAILED)
        self._wake()

    def flush(self) -> None:
        return None

    # ------------------------------------------------------------------ consumer side

    async def wait(self) -> None:
        if self._pending or self._finished or self._error is not None:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiter = fut
        try:
            await fut
        finally:
            self._waiter = None

    def take(self) -> list[ModalResult]:
        out, self._pending = self._pending, []
        return out

    @property
    def finished(self) -> bool:
        """The engine sent its last result (take() may still hold some)."""
        return self._finished

    @property
    def error(self) -> NeutrinoError | None:
        return self._error

    async def result(self) -> ModalResult:
        """The single result of a one-answer query; raises the request's error."""
        while True:
            await self.wait()
            if self._error is not None:
                raise self._error.fresh()
            if self._finished:
                return self._pending[-1]

    def close(self, reason: str = "client disconnected") -> None:
        """End from the client side: one cancel to the engine if it is still working."""
        if self.lifecycle.terminal:
            return
        if self._submission is not None:
            self._submission.cancel(reason)
        self._error = NeutrinoError(ErrorKind.CANCELLED, "the request was cancelled")
        self._end(State.CANCELLED)
        self._wake()

    # ------------------------------------------------------------------ internals

    def abort(self, error: NeutrinoError, reason: str) -> None:
        """End from the server's side (deadline, shutdown): one cancel with ``reason``."""
        if self.lifecycle.terminal:
            return
        if self._submission is not None:
            self._submission.cancel(reason)
        self._error = error
        self._end(State.FAILED)
        self._wake()

    def _on_timeout(self) -> None:
        self._timer = None
        self.abort(NeutrinoError(ErrorKind.TIMEOUT, "the request timed out"), "timeout")

    def _end(self, state: State) -> None:
        self.lifecycle.advance(state)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._submission is not None:
            self._submission.forget()
        self._on_done(self)

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)
