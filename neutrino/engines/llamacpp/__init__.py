"""The llama.cpp engine: a GGUF model behind Neutrino's engine protocol.

``python -m neutrino.engines.llamacpp --socket S --gguf PATH --model NAME`` (the
``llamacpp`` extra: llama-cpp-python, whose low-level bindings are all it uses).

- ``backend``: the llama.cpp calls (model, context, batch, sampler chains, memory), thin.
- ``guided``: guided decoding modes as llama.cpp grammars (GBNF).
- ``scheduler``: continuous batching; one decode thread owns the context.
- ``handler``: the engine protocol's callbacks (``EngineHandler``) and the queue to
  and from the decode thread.
"""
