"""Where every request's end is recorded, exactly once, whatever ended it.

A request that reached an engine ends through its Generation, ModalCall or RelayCall
(``done``);
one that failed or was abandoned before (``abort``) ends here directly. Either way its
engine slot and its key's count are released, its terminal state counted, its metrics
and span closed and its history entry written.
"""

from __future__ import annotations

import asyncio
import logging

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.admission import Admission, Ticket
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.call import ModalCall
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.history import History, HistoryEntry
from neutrino.pipeline.observe import Observed, Observer
from neutrino.pipeline.quota import Quotas
from neutrino.pipeline.relay import RelayCall
from neutrino.pipeline.state import Lifecycle, State

log = logging.getLogger("neutrino.pipeline")


class Endings:
    def __init__(
        self, admission: Admission, observe: Observer, history: History, quotas: Quotas
    ) -> None:
        self.admission = admission
        self.quotas = quotas
        self.observe = observe
        self.history = history
        # Requests at an engine (Generation, ModalCall, RelayCall), for a shutdown to end them.
        self.live: set[Generation | ModalCall | RelayCall] = set()
        self.finished: dict[str, int] = {}  # terminal state -> requests

    def _count(self, state: State) -> None:
        name = state._value_  # the plain str (``.value`` is a property call)
        self.finished[name] = self.finished.get(name, 0) + 1

    def done(self, gen: Generation | ModalCall | RelayCall) -> None:
        """A request that reached an engine has ended (its ``on_done``)."""
        self.live.discard(gen)
        if gen.principal is not None:
            gen.principal.release()
        spent = gen.spent()
        self.settle(gen.ticket, spent.prompt_tokens + spent.completion_tokens)
        self.admission.release(gen.ticket)
        self._count(gen.lifecycle.state)
        if gen.obs is not None:
            gaps = None if isinstance(gen, ModalCall) else gen.gaps()
            self.observe.end(gen.obs, gen.model, gen.lifecycle, gen.error, spent, gen, gaps)
        entry = HistoryEntry.of_ended(gen, spent)
        if gen.principal is not None:
            entry.key = gen.principal.name
        self.history.add(entry)

    def settle(self, ticket: Ticket, used: int) -> None:
        """A request ended having used ``used`` tokens: its key's fair share and its rate
        limits' token counts are corrected from the estimate it was charged."""
        key = ticket.rated
        if key is not None and used != ticket.rated_tokens:
            self.quotas.settle(key, used - ticket.rated_tokens)
            ticket.rated_tokens = used
        self.admission.settle(ticket, used)

    def abort(
        self,
        request_id: str,
        model: str,
        lifecycle: Lifecycle,
        admitted: Ticket | None,
        exc: BaseException,
        caller: Principal | None = None,
        counted: bool = False,
        obs: Observed | None = None,
    ) -> BaseException:
        """End a request that failed before reaching the engine; the exception to raise.

        The caller raises it straight from its ``except`` clause: bound to a local, the
        error would hold the caller's frame (its traceback does), and the frame the
        request, in a cycle only the garbage collector's full pass would free."""
        if admitted is not None and not lifecycle.terminal:
            self.admission.release(admitted)
        if counted and caller is not None and not lifecycle.terminal:
            caller.release()
        key = caller.name if caller is not None else None
        if isinstance(exc, NeutrinoError):
            self.fail_early(request_id, model, lifecycle, State.FAILED, exc, key, obs)
            return exc
        if isinstance(exc, asyncio.CancelledError | ConnectionError):
            # The client went away (its handler was cancelled, or opening its stream failed).
            self.fail_early(request_id, model, lifecycle, State.CANCELLED, None, key, obs)
            return exc
        if not isinstance(exc, Exception):
            return exc  # KeyboardInterrupt and the like pass through untouched
        log.error("request %s failed before reaching the engine", request_id, exc_info=exc)
        err = NeutrinoError(ErrorKind.INTERNAL, "internal error")
        self.fail_early(request_id, model, lifecycle, State.FAILED, err, key, obs)
        return err

    def fail_early(
        self,
        request_id: str,
        model: str,
        lifecycle: Lifecycle,
        state: State,
        err: NeutrinoError | None,
        key: str | None = None,
        obs: Observed | None = None,
    ) -> None:
        if lifecycle.terminal:
            return
        lifecycle.advance(state)
        self._count(state)
        if err is not None:
            err.counted = True
        if obs is not None:
            self.observe.end(obs, model, lifecycle, err)
        entry = HistoryEntry.of(request_id, model, lifecycle, error=err)
        entry.key = key
        self.history.add(entry)
