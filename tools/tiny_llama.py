"""Writes a tiny Llama-architecture model with random weights (a few MB) for the vLLM
engine's tests: SmolLM2's vocabulary (49,152 ids, a tokenizer Neutrino ships), two
layers, a head size vLLM's CPU attention takes. Run with the vLLM venv's Python:

    .venv-vllm/bin/python tools/tiny_llama.py OUT_DIR [TOKENIZER_JSON]

With TOKENIZER_JSON (SmolLM2's, as Neutrino ships it), the folder gets that tokenizer
too: vLLM then serves structured outputs (their grammars need the vocabulary's strings).
"""

import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    out = sys.argv[1]
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=49152,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,  # head size 64
        num_key_value_heads=1,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        torch_dtype="bfloat16",
    )
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    if len(sys.argv) > 2:
        shutil.copy(sys.argv[2], Path(out) / "tokenizer.json")
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 2048}
        (Path(out) / "tokenizer_config.json").write_text(json.dumps(config))


if __name__ == "__main__":
    main()
