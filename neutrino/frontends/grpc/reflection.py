"""gRPC server reflection, ``v1alpha`` (grpcio-reflection's) and ``v1`` beside it.

grpcio-reflection serves only ``grpc.reflection.v1alpha.ServerReflection``; clients that
ask for ``grpc.reflection.v1.ServerReflection`` (newer grpcurl, grpcui, Postman) find
nothing there. The v1 messages (``protos/grpc/reflection/v1/reflection.proto``, compiled
with our stubs) are field for field those of v1alpha, so the v1 service hands each
request to grpcio-reflection's servicer as the v1alpha message of the same bytes and
returns each answer the same way: one implementation, two service names.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection as v1alpha
from grpc_reflection.v1alpha import reflection_pb2 as v1alpha_pb2
from grpc_reflection.v1alpha import reflection_pb2_grpc as v1alpha_pb2_grpc

from neutrino.frontends.grpc.stubs import reflection_pb2, reflection_pb2_grpc

V1ALPHA_SERVICE: str = v1alpha.SERVICE_NAME
V1_SERVICE: str = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"].full_name


class ReflectionV1(reflection_pb2_grpc.ServerReflectionServicer):
    """``grpc.reflection.v1.ServerReflection``, answered by the v1alpha servicer."""

    def __init__(self, alpha: Any) -> None:
        self._alpha = alpha  # grpcio-reflection's aio servicer (an untyped package)

    async def ServerReflectionInfo(
        self,
        request_iterator: AsyncIterable[reflection_pb2.ServerReflectionRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        async def as_alpha() -> AsyncIterator[Any]:
            async for request in request_iterator:
                yield v1alpha_pb2.ServerReflectionRequest.FromString(request.SerializeToString())

        async for answer in self._alpha.ServerReflectionInfo(as_alpha(), context):
            yield reflection_pb2.ServerReflectionResponse.FromString(answer.SerializeToString())


def enable(services: Iterable[str], server: grpc.aio.Server) -> None:
    """Serve reflection, both versions, listing ``services`` and the two reflection
    services themselves."""
    alpha = v1alpha.aio.ReflectionServicer((*services, V1ALPHA_SERVICE, V1_SERVICE))
    v1alpha_pb2_grpc.add_ServerReflectionServicer_to_server(alpha, server)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(ReflectionV1(alpha), server)
