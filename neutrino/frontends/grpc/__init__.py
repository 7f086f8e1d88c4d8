"""gRPC front end: the versioned ``neutrino.v1`` services over ``grpc.aio``.

The stubs are generated from ``protos/`` into ``neutrino/v1/`` by ``make protos``, and
into a built wheel by setup.py (see :mod:`neutrino.frontends.grpc.codegen`); import them
through :mod:`neutrino.frontends.grpc.stubs`.
"""
