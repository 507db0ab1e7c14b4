"""Build an onnxruntime graph of the BERT encoder of multilingual-e5-small from its Q4_0 weights.

Two arithmetics, one model id (their vectors agree to cosine 0.999, closer than int8 and fp32
compute of the MiniLM default, which also share one id):
- ``int8`` (CPUs with VNNI): each 4-bit matrix is dequantized and requantized to int8 with one
  scale per output column, then run like the MiniLM rewrite (:mod:`int8graph`): activations
  quantized per token, ``MatMulIntegerToFloat``, the GELU output shifted into uint8. Measured
  against onnxruntime's own 4-bit kernel (``MatMulNBits``) on the same inputs: 1.3-2x faster,
  vectors within cosine 0.9989-0.9994 of the 4-bit reference.
- ``fp32``: the 4-bit blocks as they are, in ``MatMulNBits`` with fp32 arithmetic; vectors equal
  the package's own C engine to cosine 0.99997.
Per layer: one fused Q/K/V product, ``MultiHeadAttention``, ``SkipLayerNormalization`` and
``BiasGelu`` (onnxruntime contrib kernels), so a short query runs few kernels. The word
embeddings (250k x 384, 54 MB in 4 bits) stay outside the graph: the embedder dequantizes only
the rows of the tokens it sees.
"""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx import numpy_helper as nh

from engram_api.embeddings.e5file import QK, Blocks, E5File, Floats, dequantize
from engram_api.embeddings.int8graph import _CONSTANTS, GELU_SHIFT, _quantize_rows

Arithmetic = Literal["int8", "fp32"]
_OPSETS: Final = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


class _Builder:
    def __init__(self, f: E5File, arithmetic: Arithmetic) -> None:
        self.f, self.arithmetic = f, arithmetic
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = [nh.from_array(np.array(v), k) for k, v in _CONSTANTS]

    def const(self, name: str, value: Floats) -> str:
        self.inits.append(nh.from_array(np.ascontiguousarray(value, dtype=np.float32), name))
        return name

    def matmul(
        self, x: str, blocks: Blocks, y: str, *, bias: Floats | None = None
    ) -> Floats | None:
        """``y = x @ W^T`` for the 4-bit ``W`` [n_out, n_in]; returns ``bias`` adjusted if the
        input had to be shifted (the GELU output in int8 arithmetic)."""
        n_out, n_in = blocks.shape[0], blocks.shape[1] * QK
        if self.arithmetic == "fp32":
            qs = blocks["qs"]
            q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # element order 0..31
            packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)  # ORT: 2j low, 2j+1 high
            self.inits.append(nh.from_array(packed, y + "_B"))
            self.const(y + "_S", blocks["d"].astype(np.float32).reshape(-1))
            self.nodes.append(
                helper.make_node(
                    "MatMulNBits",
                    [x, y + "_B", y + "_S"],
                    [y],
                    domain="com.microsoft",
                    K=n_in,
                    N=n_out,
                    bits=4,
                    block_size=QK,
                    accuracy_level=0,
                )
            )
            return bias
        w = dequantize(blocks)
        scale = np.maximum(np.abs(w).max(axis=1), 1e-12) / 127.0
        wq = np.clip(np.round(w / scale[:, None]), -127, 127).astype(np.int8)
        self.inits.append(nh.from_array(np.ascontiguousarray(wq.T), y + "_w"))
        self.const(y + "_ws", scale)
        shifted = bias is not None
        nodes, xq, xs = _quantize_rows(x, y + "_", shifted=shifted)
        self.nodes += nodes
        self.nodes += [
            helper.make_node(
                "MatMulIntegerToFloat",
                [xq, y + "_w", "q8_one", y + "_ws", "q8_zp0" if shifted else "q8_zp128"],
                [y + "_y"],
                domain="com.microsoft",
            ),
            helper.make_node("Mul", [y + "_y", xs], [y]),
        ]
        if bias is None:
            return None
        # The shifted input adds GELU_SHIFT * colsum(W) to every output: fold it into the bias.
        wf = wq.astype(np.float32) * scale[:, None].astype(np.float32)
        fixed: Floats = (bias - GELU_SHIFT * wf.sum(axis=1)).astype(np.float32)
        return fixed

    def layer(self, i: int, x: str) -> str:
        f, p, h = self.f, f"l{i}", self.f.hidden
        mk = helper.make_node
        qkv = np.concatenate([f.q4(f"{p}.{n}.w", h, h) for n in "qkv"], axis=0)
        self.matmul(x, qkv, p + "_qkv")
        qkv_bias = np.concatenate([f.floats(f"{p}.{n}.b") for n in "qkv"])
        heads = [p + "_q", p + "_k", p + "_v"]
        self.nodes += [
            mk("Split", [p + "_qkv", "e5_split3"], heads, axis=-1),
            mk(
                "MultiHeadAttention",
                [*heads, self.const(p + "_qkvb", qkv_bias), "e5_mask"],
                [p + "_ctx"],
                domain="com.microsoft",
                num_heads=f.heads,
            ),
        ]
        self.matmul(p + "_ctx", f.q4(f"{p}.ao.w", h, h), p + "_ao")
        self.skip_ln(p + "_ao", x, p, "aln", f.floats(f"{p}.ao.b"), p + "_x1")
        self.matmul(p + "_x1", f.q4(f"{p}.fi.w", f.ffn, h), p + "_fi")
        self.nodes.append(
            mk(
                "BiasGelu",
                [p + "_fi", self.const(p + "_fib", f.floats(f"{p}.fi.b"))],
                [p + "_g"],
                domain="com.microsoft",
            )
        )
        fo_bias = self.matmul(
            p + "_g", f.q4(f"{p}.fo.w", h, f.ffn), p + "_fo", bias=f.floats(f"{p}.fo.b")
        )
        if fo_bias is None:  # matmul returns the bias it is given
            raise AssertionError("FFN bias lost")
        self.skip_ln(p + "_fo", p + "_x1", p, "oln", fo_bias, p + "_x2")
        return p + "_x2"

    def skip_ln(self, y: str, skip: str, p: str, ln: str, bias: Floats, out: str) -> None:
        """``out = LayerNorm(y + bias + skip)``."""
        f = self.f
        self.nodes.append(
            helper.make_node(
                "SkipLayerNormalization",
                [
                    y,
                    skip,
                    self.const(f"{p}_{ln}_w", f.floats(f"{p}.{ln}.w")),
                    self.const(f"{p}_{ln}_b", f.floats(f"{p}.{ln}.b")),
                    self.const(f"{out}_bias", bias),
                ],
                [out],
                domain="com.microsoft",
                epsilon=f.eps,
            )
        )

    def build(self) -> bytes:
        h = self.f.hidden
        self.inits.append(nh.from_array(np.full(3, h, dtype=np.int64), "e5_split3"))
        self.nodes.append(
            helper.make_node("Cast", ["attention_mask"], ["e5_mask"], to=TensorProto.INT32)
        )
        x = "embeddings"
        for i in range(self.f.layers):
            x = self.layer(i, x)
        self.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
        graph = helper.make_graph(
            self.nodes,
            "multilingual-e5-small",
            [
                helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["b", "s", h]),
                helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"]),
            ],
            [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["b", "s", h])],
            initializer=self.inits,
        )
        model = helper.make_model(graph, opset_imports=_OPSETS, ir_version=9)
        out: bytes = model.SerializeToString()
        return out


def build_graph(f: E5File, arithmetic: Arithmetic) -> bytes:
    """The encoder graph (embedding LayerNorm output in, last hidden state out)."""
    return _Builder(f, arithmetic).build()
