"""Registers the ``neutrino.v1`` services so that a request that is not a valid protobuf
message of its method is an INVALID_ARGUMENT status like any other bad input.

The generated ``add_*Servicer_to_server`` functions register each method with its
message's ``FromString``; when that raises, grpc logs a traceback and answers INTERNAL,
so any client could fill the log with tracebacks. Here the generated function registers
into a stand-in, and each method handler is registered wrapped: its deserializer returns
a marker instead of raising, and its behaviour answers the marker with a status.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from neutrino.errors import bad_request
from neutrino.frontends.grpc.calls import fail

_MALFORMED = object()  # what a request that does not parse deserializes to


def _safe(handler: Any) -> Any:
    parse = handler.request_deserializer

    def deserialize(data: bytes) -> object:
        try:
            return parse(data)
        except Exception:  # protobuf's DecodeError, and whatever a corrupt message raises
            return _MALFORMED

    streaming = handler.unary_stream is not None
    behaviour = handler.unary_stream if streaming else handler.unary_unary
    serialize = handler.response_serializer

    def serialize_or_pass(message: object) -> bytes:
        """A message, or an answer already serialised (a large one, in pieces)."""
        return message if isinstance(message, bytes) else serialize(message)

    async def run(request: object, context: Any) -> Any:
        if request is _MALFORMED:
            fail(
                context, bad_request("the request is not a valid protobuf message for this method")
            )
            return None
        return await behaviour(request, context)

    if streaming:
        return handler._replace(request_deserializer=deserialize, unary_stream=run)
    return handler._replace(
        request_deserializer=deserialize, unary_unary=run, response_serializer=serialize_or_pass
    )


class _Registrar:
    """Stands in for the server while a generated function registers one service."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # registered, wrapped, by add_registered_method_handlers below

    def add_registered_method_handlers(self, service: str, handlers: dict[str, object]) -> None:
        wrapped = {name: _safe(h) for name, h in handlers.items()}
        generic = grpc.method_handlers_generic_handler(service, wrapped)
        self._server.add_generic_rpc_handlers((generic,))
        self._server.add_registered_method_handlers(service, wrapped)


def add_service(
    add_to_server: Callable[[Any, Any], None], servicer: object, server: grpc.aio.Server
) -> None:
    """``add_to_server(servicer, server)`` (a generated function), malformed requests
    answered as INVALID_ARGUMENT."""
    add_to_server(servicer, _Registrar(server))
