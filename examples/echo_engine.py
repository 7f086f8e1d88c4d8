"""A minimal engine for Neutrino: it serves one model, "echo", whose answer to a prompt is
the prompt's own last words, one token every 10 ms. Run it, then point Neutrino at it:

    .venv/bin/python examples/echo_engine.py --socket /tmp/echo.sock
    .venv/bin/python -m neutrino --engine /tmp/echo.sock

The protocol's rules (the hello first, request ids, cancels of finished requests, pings,
dropping a finished request's frames) are kept by the session the serving code gives each
connection; an engine only answers its callbacks.
"""

from __future__ import annotations

import argparse
import asyncio

from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    ModelInfo,
    Query,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.serve import RequestTasks, ServerConnection, serve_until_signalled
from neutrino.engines.session import EngineHandler, not_served

MODEL = ModelInfo("echo", context_length=4096)
STEP_S = 0.01


class EchoHandler(EngineHandler):
    """One client connection's callbacks: its requests are tasks (RequestTasks)."""

    def __init__(self) -> None:
        self.conn: ServerConnection | None = None
        self.tasks = RequestTasks()

    def hello_ack(self, hello: Hello) -> HelloAck:
        """Who we are, what we serve, how many requests at once."""
        return HelloAck("echo-engine", PROTOCOL_VERSION, [MODEL], capacity=16)

    def start(self, rid: int, query: Query) -> EngineError | None:
        """Begin a query; an error returned here is its answer."""
        if not isinstance(query, TextQuery):
            return not_served(query)  # embeddings, audio ...: not ours
        if query.model != MODEL.name:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"no model {query.model!r} here")
        self.tasks.start(rid, self._answer(rid, query))
        return None

    async def _answer(self, rid: int, query: TextQuery) -> None:
        assert self.conn is not None
        # The prompt's last tokens, at most max_tokens: the chat template's own markers
        # at its end (special tokens) are skipped by Neutrino's detokenizer.
        reply = query.prompt_tokens[-max(1, query.sampling.max_tokens) :]
        for token in reply[:-1]:
            await asyncio.sleep(STEP_S)
            self.conn.send(rid, TextResult([token]))  # one step's token
        await asyncio.sleep(STEP_S)
        if self.tasks.finish(rid):  # not cancelled meanwhile: the final frame
            self.conn.send(
                rid,
                TextResult(
                    reply[-1:],
                    finish_reason=FinishReason.LENGTH,
                    prompt_tokens=len(query.prompt_tokens),
                    completion_tokens=len(reply),
                ),
            )

    def cancel(self, rid: int, reason: str) -> None:
        """The client left (or a stop string matched): stop generating."""
        self.tasks.cancel(rid)

    def lost(self) -> None:
        """The connection is gone: stop every request of it."""
        self.tasks.cancel_all()


def connection() -> ServerConnection:
    handler = EchoHandler()
    handler.conn = ServerConnection(handler)
    return handler.conn


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--socket", required=True, help="the UNIX socket to listen on")
    args = p.parse_args()
    asyncio.run(
        serve_until_signalled(args.socket, connection, f"echo engine ready on {args.socket}")
    )


if __name__ == "__main__":
    main()
