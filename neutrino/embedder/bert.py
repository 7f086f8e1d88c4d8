"""Sans-IO BERT encoder in NumPy with mean pooling: sentence embeddings of token id lists.

Reads the model's ``config.json`` and ``model.safetensors`` (parsed directly: an 8-byte
header length, a JSON header, then the raw tensors) and runs the standard post-LayerNorm
BERT encoder. Inputs are WordPiece ids without [CLS]/[SEP]; the encoder adds them.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def load_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    data = path.read_bytes()
    (size,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    out: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        count = (end - start) // dtype.itemsize
        arr = np.frombuffer(data, dtype=dtype, count=count, offset=base + start)
        out[name] = arr.reshape(info["shape"])
    return out


def _layer_norm(x: Array, w: Array, b: Array, eps: float) -> Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: Array = ((x - mean) / np.sqrt(var + eps) * w + b).astype(np.float32)
    return out


def _gelu(x: Array) -> Array:
    # The exact (erf) GELU that BERT uses, via a rational erf approximation accurate to 1e-7.
    return (0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))).astype(np.float32)


def _erf(x: Array) -> Array:
    # Abramowitz-Stegun 7.1.26 is too coarse; use the high-precision erfc series instead.
    sign = np.sign(x)
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = (
        -a * a
        - 1.26551223
        + t
        * (
            1.00002368
            + t
            * (
                0.37409196
                + t
                * (
                    0.09678418
                    + t
                    * (
                        -0.18628806
                        + t
                        * (
                            0.27886807
                            + t
                            * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))
                        )
                    )
                )
            )
        )
    )
    return (sign * (1.0 - t * np.exp(poly))).astype(np.float32)


class BertEncoder:
    """all-MiniLM-L6-v2 style: BERT encoder, mean pooling over real tokens, L2 normalised."""

    def __init__(self, model_dir: Path, max_tokens: int = 256) -> None:
        cfg = json.loads((model_dir / "config.json").read_text())
        self.hidden = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg["layer_norm_eps"])
        self.vocab_size = int(cfg["vocab_size"])
        self.max_tokens = min(max_tokens, int(cfg["max_position_embeddings"]))
        self.w = load_safetensors(model_dir / "model.safetensors")
        self.cls_id, self.sep_id, self.pad_id = 101, 102, int(cfg.get("pad_token_id", 0))

    @property
    def dimensions(self) -> int:
        return self.hidden

    def embed(self, inputs: list[list[int]], normalize: bool = True) -> Array:
        """One vector per input (rows), inputs truncated to ``max_tokens`` with [CLS]/[SEP]."""
        seqs = [[self.cls_id, *ids[: self.max_tokens - 2], self.sep_id] for ids in inputs]
        n = max(len(s) for s in seqs)
        ids = np.full((len(seqs), n), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(seqs), n), dtype=np.float32)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1.0
        x = self._encode(ids, mask)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        if normalize:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        result: Array = pooled.astype(np.float32)
        return result

    def _encode(self, ids: npt.NDArray[np.int64], mask: Array) -> Array:
        w = self.w
        b, n = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        h, d = self.heads, self.hidden // self.heads
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(t: Array, name: str, p: str = p) -> Array:
                out: Array = t @ w[p + name + ".weight"].T + w[p + name + ".bias"]
                return out

            q = lin(x, "attention.self.query").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(b, n, h, d).transpose(0, 2, 3, 1)
            v = lin(x, "attention.self.value").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            scores = (q @ k) / np.sqrt(d) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b, n, self.hidden)
            x = _layer_norm(
                x + lin(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            ff = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
            x = _layer_norm(
                x + ff, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps
            )
        return x.astype(np.float32)
