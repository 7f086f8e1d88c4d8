"""The vLLM engine: vLLM's ``AsyncLLM`` on the engine protocol (``python -m
neutrino.engines.vllm``); ``mapping`` holds its rules without importing vLLM."""
