"""gRPC front end: the versioned ``neutrino.v1`` services over ``grpc.aio``.

The stubs are generated from ``protos/`` into ``neutrino/v1/`` by ``make protos``
(see :mod:`neutrino.frontends.grpc.codegen`); import them through
:mod:`neutrino.frontends.grpc.stubs`.
"""
