"""OpenAI-compatible HTTP servers as engines (``[[engines]] url = ...``).

``llamacpp`` is the sans-IO dialect of llama.cpp's server in token mode (a query in,
a request body out; the stream's events in, :class:`TextResult` s out); ``pool`` is its
asyncio adapter, which the router uses as it uses a pool of socket connections.
"""
