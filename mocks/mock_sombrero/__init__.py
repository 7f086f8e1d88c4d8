"""mock_sombrero: a Sombrero load balancer for tests and local development.

A real gRPC server of ``protos/sombrero/v1/sombrero.proto`` that keeps the registry in
memory, answers ``List``, shows the registry as a JSON page and can be told to fail.
"""
