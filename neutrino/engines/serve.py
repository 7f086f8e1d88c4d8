"""asyncio adapter: an :class:`EngineSession` per client connection on a UNIX socket,
or on TCP (an engine a node agent runs, which every client's hello must give the token).

The connection feeds the session the bytes it reads and writes what the session
queues, once per loop iteration (an iteration is an engine step: the frames its
requests produced leave together). Handlers write through :meth:`send` and may
wait for :meth:`writable` while the client's socket is full.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NoReturn, Protocol, TypeVar, cast

from neutrino.engine.messages import Hello, HelloAck, Message
from neutrino.engines.session import EngineHandler, EngineSession

_BACKLOG = 1024


class ServerConnection(asyncio.Protocol):
    """One client of an engine: transport, write batching and flow control."""

    def __init__(self, handler: EngineHandler, *, batch_tokens: bool = True) -> None:
        self.session = EngineSession(handler, batch_tokens=batch_tokens)
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self._drain: asyncio.Future[None] | None = None
        self._flush_due = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        self.session.receive_data(data)
        if self.session.closing is not None:
            self.flush()
            if self.transport is not None:
                self.transport.close()
        elif self.session.wants_to_send:
            self._flush_soon()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._wake()
        self.session.connection_lost()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake()

    # ------------------------------------------------------------------ for handlers

    def send(self, rid: int, msg: Message) -> None:
        """Queue a frame; everything queued in one loop iteration leaves in one write."""
        self.session.send(rid, msg)
        if not self._flush_due and self._loop is not None:  # one write per loop iteration
            self._flush_due = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued now (also before closing or aborting)."""
        self._flush_due = False
        t = self.transport
        if t is not None and self.session.wants_to_send and not t.is_closing():
            t.write(self.session.data_to_send())

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    async def writable(self) -> None:
        """Return once the client's socket takes writes again (or is gone)."""
        while self.paused and self.transport is not None:
            if self._drain is None or self._drain.done():
                self._drain = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drain)

    def _flush_soon(self) -> None:
        if not self._flush_due and self._loop is not None:
            self._flush_due = True
            self._loop.call_soon(self.flush)

    def _wake(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None


async def listen_unix(
    path: str, factory: Callable[[], asyncio.Protocol], mode: int = 0o600
) -> asyncio.AbstractServer:
    """Serve ``factory``'s protocols on ``path`` (replacing a stale socket).

    The socket gets ``mode`` (the owner only, by default) before anyone can connect,
    and is bound and listening under a temporary name first, then renamed: ``path``
    appears only once connections to it succeed.
    """
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise FileExistsError(f"{path} exists and is not a socket")
        os.unlink(path)
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".engine.{os.getpid()}.{id(factory)}.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.bind(tmp)
        except OSError:  # e.g. the temporary name is too long: bind in place
            tmp = path
            sock.bind(path)
        os.chmod(tmp, mode)
        sock.listen(_BACKLOG)
        sock.setblocking(False)
        server = await asyncio.get_running_loop().create_unix_server(
            factory, sock=sock, backlog=_BACKLOG
        )
    except BaseException:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if tmp != path:
        os.replace(tmp, path)
    return server


class Greeter(Protocol):
    def hello_ack(self) -> HelloAck: ...


E = TypeVar("E", bound=Greeter)


class ConnectionHandler(EngineHandler, Generic[E]):
    """One client connection's handler over the engine every connection shares: a hello
    is answered with the engine's ``hello_ack``, and frames go out through ``conn``."""

    def __init__(self, engine: E) -> None:
        self.engine = engine
        self.conn: ServerConnection | None = None

    def hello_ack(self, hello: Hello) -> HelloAck:
        return self.engine.hello_ack()

    def connect(self, *, batch_tokens: bool = True) -> ServerConnection:
        """The client connection's protocol object, this handler's."""
        self.conn = ServerConnection(self, batch_tokens=batch_tokens)
        return self.conn


def remove_socket(path: str, inode: int) -> None:
    """Remove our socket file, unless another process has replaced it since."""
    with contextlib.suppress(OSError):
        if os.lstat(path).st_ino == inode:
            os.unlink(path)


@dataclass(frozen=True, slots=True)
class Listen:
    """Where an engine process listens: a UNIX socket's ``path``, or TCP ``host`` and
    ``port``, where every client's hello must carry ``token``."""

    path: str = ""
    host: str = ""
    port: int = 0
    token: str = field(default="", repr=False)

    @property
    def where(self) -> str:
        return self.path or f"{self.host}:{self.port}"


def start_logging(level: str) -> None:
    """An engine process's log: its lines on stderr from ``level`` up (a level's name)."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(name)s: %(message)s")


def exit_missing(needs: str, exc: ImportError, install: str) -> NoReturn:
    """Exit (status 1) on an optional install missing: what ``needs`` it, which module
    was not found, and how to ``install`` it."""
    print(f"{needs} ({exc.name} is missing): {install}", file=sys.stderr)
    raise SystemExit(1) from None


def add_listen_arguments(p: argparse.ArgumentParser) -> None:
    """An engine command's flags for where it listens (``listen_of`` reads them)."""
    p.add_argument("--socket", help="UNIX socket to listen on")
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="listen on TCP instead (an engine a node agent runs); every client's hello must "
        "carry the token of --token-file or --token-env",
    )
    p.add_argument("--token-file", help="with --listen: a file holding the token")
    p.add_argument("--token-env", help="with --listen: the environment variable holding it")


def listen_of(
    args: argparse.Namespace, p: argparse.ArgumentParser, environ: Mapping[str, str] | None = None
) -> Listen:
    """The :class:`Listen` of ``add_listen_arguments``'s flags (a usage error if wrong)."""
    if bool(args.socket) == bool(args.listen):
        p.error("give --socket PATH or --listen HOST:PORT")
    if args.socket:
        return Listen(path=str(Path(args.socket)))
    host, sep, port = args.listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        p.error(f"--listen: not HOST:PORT: {args.listen!r}")
    env = os.environ if environ is None else environ
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            p.error(f"--token-file: cannot read {args.token_file!r}: {exc.strerror}")
    elif args.token_env:
        token = env.get(args.token_env, "").strip()
    else:
        token = ""
    if not token:
        p.error("--listen needs a token (--token-file FILE or --token-env NAME, not empty)")
    return Listen(host=host.strip("[]"), port=int(port), token=token)


async def listen_tcp(
    host: str, port: int, token: str, factory: Callable[[], ServerConnection]
) -> asyncio.AbstractServer:
    """Serve ``factory``'s connections on TCP; each session asks for ``token``."""

    def guarded() -> ServerConnection:
        conn = factory()
        conn.session.token = token
        return conn

    return await asyncio.get_running_loop().create_server(
        guarded, host, port, backlog=_BACKLOG, reuse_address=True
    )


async def serve_until_signalled(
    where: str | Listen, factory: Callable[[], ServerConnection], ready: str
) -> None:
    """An engine process's life: serve ``factory``'s connections on ``where`` (a UNIX
    socket, mode 0600, or TCP with a token), print ``ready`` (the line its supervisor's
    log shows), run until SIGINT or SIGTERM, then stop listening (and remove the socket)."""
    listen = where if isinstance(where, Listen) else Listen(path=where)
    loop = asyncio.get_running_loop()
    inode = 0
    if listen.path:
        server = await listen_unix(listen.path, factory, 0o600)
        inode = os.lstat(listen.path).st_ino
    else:
        server = await listen_tcp(listen.host, listen.port, listen.token, factory)
    print(ready, file=sys.stderr, flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    if listen.path:
        remove_socket(listen.path, inode)


class RequestTasks:
    """The task answering each request of one connection, for an engine whose requests
    are coroutines (the embedder, vLLM): a cancel or a lost connection cancels them."""

    def __init__(self) -> None:
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, rid: int, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks[rid] = asyncio.get_running_loop().create_task(coro)

    def finish(self, rid: int) -> bool:
        """Forget a request that is answering now; False if it was cancelled meanwhile."""
        return self._tasks.pop(rid, None) is not None

    def cancel(self, rid: int) -> None:
        task = self._tasks.pop(rid, None)
        if task is not None:
            task.cancel()

    def cancel_all(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()
