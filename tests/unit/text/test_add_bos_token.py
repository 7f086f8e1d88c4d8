"""Whether a family's plain completion prompt starts with its BOS (``add_bos_token``) agrees
with what the published Hugging Face tokenizer does.

llama.cpp's GGUF converter (``convert_hf_to_gguf.py``, ``get_vocab_base_pre``) hashes the ids
a model's tokenizer gives for a check text with default settings, BOS included when the
tokenizer adds one, and records the hash for a reference model; ``gpt-4o`` is also the hash
it gives gpt-oss and Phi-4-mini (their GGUFs name that pre-tokenizer).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from neutrino.text.registry import TOKENIZER_FILES, load_tokenizer
from neutrino.text.templates import load_families

from .conftest import AVAILABLE
from .test_tokenizer_smollm2 import LLAMA_CPP_CHECK_TEXT

# family -> hash recorded by llama.cpp (the reference model in its comment)
RECORDED = {
    "llama3": "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5",  # Meta-Llama-3-8B
    "deepseek-r1-distill-llama": "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5",
    "deepseek-v3": "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5",
    # DeepSeek-R1 and V3.1: V3's vocabulary, and their tokenizer_config.json adds the BOS
    "deepseek-r1": "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5",
    "deepseek-v3.1": "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5",
    # DeepSeek-R1-Distill-Qwen-1.5B
    "deepseek-r1-distill-qwen": "b3f499bb4255f8ca19fccd664443283318f2fd2414d5e0b040fbdd0cc195d6c5",
    # deepseek-coder-6.7b-base
    "deepseek-coder": "347715f544604f9118bb75ed199f68779f423cabb20db6de6f31b908d04d7821",
    "command-r": "9c2227e4dd922002fb81bde4fc02b0483ca4f12911410dee2255e4987644e3f8",  # v01
    # Mistral-Nemo-Base-2407 ("tekken")
    "mistral-nemo": "63b97e4253352e6f357cc59ea5b583e3a680eaeaf2632188c2b952de2588485e",
    # Llama-4-Scout-17B-16E-Instruct
    "llama4": "d353350c764d8c3b39c763113960e4fb4919bea5fbf208a0e3b22e8469dc7406",
    "gpt-oss": "ccc2ef013c104be7bae2965776d611e1d7a8a2a9c547dd93a682c9a9fc80352e",  # gpt-4o
    "phi4-mini": "ccc2ef013c104be7bae2965776d611e1d7a8a2a9c547dd93a682c9a9fc80352e",  # gpt-4o
    # zai-org/GLM-4.7-Flash ("glm4"): its tokenizer adds nothing, the template writes [gMASK]<sop>
    "glm47-flash": "cdf5f35325780597efd76153d4d1c16778f766173908894c04afc20108536267",
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_completion_prompt_ids_hash_as_llama_cpp_recorded(name: str) -> None:
    family = load_families()[name]
    if family.tokenizer not in AVAILABLE:
        pytest.skip(f"tokenizer {family.tokenizer!r} not installed")
    tok = load_tokenizer(family.tokenizer)
    ids = tok.encode(LLAMA_CPP_CHECK_TEXT)
    if family.add_bos_token:
        bos = tok.token_to_id(family.bos_token or "")
        assert bos is not None
        ids = [bos, *ids]
    assert hashlib.sha256(str(ids).encode()).hexdigest() == RECORDED[name]


@pytest.mark.parametrize(("family", "folder"), [("gemma2", "gemma"), ("gemma3", "gemma3")])
def test_gemma_tokenizer_json_adds_bos(family: str, folder: str) -> None:
    """The installed tokenizer.json's post-processor puts <bos> in front."""
    path = TOKENIZER_FILES / folder / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} not installed")
    post = json.loads(path.read_text("utf-8"))["post_processor"]
    assert post["type"] == "TemplateProcessing"
    assert post["single"][0] == {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    assert load_families()[family].add_bos_token is True
