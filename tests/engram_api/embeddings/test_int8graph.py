"""The int8-compute rewrite of the packaged model: pinned bytes, close vectors, batch-free."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from engram_api.embeddings.base import EmbeddingConfigError
from engram_api.embeddings.int8graph import GraphShapeError, convert
from engram_api.embeddings.local import (
    INT8_GRAPH_SHA256,
    LocalEmbedder,
    check_int8_graph,
    cpu_has_vnni,
    default_model_path,
)

TEXTS = [
    "The user prefers dark mode in the editor.",
    "Deploys to production need a second reviewer on Fridays.",
    "Carol: I finally adopted a dog last spring, his name is Max!",
    "postgres 16 upgrade rolled back after replication lag",
    "Use pnpm, not npm, in this repository.",
    "ok",
    "A much longer memory about the nightly backup job, which copies every collection "
    "to object storage at two in the morning and keeps fourteen daily snapshots.",
    "Der Nutzer bevorzugt den dunklen Modus.",
]


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[LocalEmbedder, LocalEmbedder]]:
    int8, fp32 = LocalEmbedder.load(compute="int8"), LocalEmbedder.load(compute="fp32")
    yield int8, fp32
    int8.close()
    fp32.close()


def test_the_rewrite_is_deterministic_and_gives_the_pinned_graph() -> None:
    src = default_model_path().read_bytes()
    first, second = convert(src), convert(src)
    assert first == second
    assert hashlib.sha256(first).hexdigest() == INT8_GRAPH_SHA256


async def test_int8_vectors_stay_close_to_the_packaged_fp32_graph(
    pair: tuple[LocalEmbedder, LocalEmbedder],
) -> None:
    int8, fp32 = pair
    assert (int8.compute, fp32.compute) == ("int8", "fp32")
    a = np.stack(await int8.embed_documents(TEXTS))
    b = np.stack(await fp32.embed_documents(TEXTS))
    cosines = (a * b).sum(axis=1)
    # Measured over 2,000 LoCoMo turns: mean 0.998, min 0.994; a one-word text ("ok") 0.988.
    assert cosines.min() > 0.98
    assert cosines.mean() > 0.995
    assert not np.allclose(a, b, atol=1e-6), "the int8 graph did not run"


async def test_an_int8_vector_does_not_depend_on_the_batch_around_it(
    pair: tuple[LocalEmbedder, LocalEmbedder],
) -> None:
    int8, _ = pair
    together = await int8.embed_documents(TEXTS)
    for text, vector in zip(TEXTS, together, strict=True):
        alone = await int8.embed_query(text)
        assert np.allclose(alone, vector, atol=1e-6)


def test_a_graph_without_int8_weights_is_refused() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.eye(4, dtype=np.float32).ravel())
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    with pytest.raises(GraphShapeError, match="no int8-weight MatMul"):
        convert(onnx.helper.make_model(graph).SerializeToString())


def test_each_layer_runs_fused_attention_and_gelu_kernels() -> None:
    graph = onnx.load_from_string(convert(default_model_path().read_bytes())).graph
    ops = Counter(n.op_type for n in graph.node)
    # 6 layers: one packed Q/K/V product + output + two FFN products each, all int8.
    assert ops["MatMulIntegerToFloat"] == 6 * 4
    assert ops["MultiHeadAttention"] == ops["BiasGelu"] == 6
    assert ops["Softmax"] == ops["Erf"] == ops["MatMul"] == 0
    assert len(graph.node) < 300, "the unfused attention subgraphs were not pruned"


def test_int8_weights_without_the_minilm_attention_are_refused() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    inits = [
        helper.make_tensor("w_q", TensorProto.INT8, [4, 4], np.eye(4, dtype=np.int8).ravel()),
        helper.make_tensor("w_scale", TensorProto.FLOAT, [4], np.ones(4, dtype=np.float32)),
    ]
    nodes = [
        helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    with pytest.raises(GraphShapeError, match="no attention layer"):
        convert(onnx.helper.make_model(graph).SerializeToString())


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu sse2 avx2 avx512f avx512_vnni", True),
        ("fpu sse2 avx2 avx_vnni", True),
        ("fpu sse2 avx2 fma", False),
    ],
)
def test_int8_compute_is_chosen_only_on_cpus_with_vnni(
    tmp_path: Path, flags: str, expected: bool
) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_has_vnni(info) is expected
    assert cpu_has_vnni(tmp_path / "missing") is False


def test_a_rewrite_that_gives_other_bytes_is_a_config_error_naming_the_way_out() -> None:
    with pytest.raises(EmbeddingConfigError, match=r"embeddings\.primary\.compute to fp32"):
        check_int8_graph(b"not the pinned graph")


def test_auto_compute_falls_back_to_fp32_with_a_log_line_when_the_rewrite_is_not_pinned(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # What another onnx or protobuf serialiser would do: the rewrite's bytes differ from the pin.
    monkeypatch.setattr("engram_api.embeddings.local.INT8_GRAPH_SHA256", "0" * 64)
    monkeypatch.setattr("engram_api.embeddings.local.cpu_has_vnni", lambda: True)
    with caplog.at_level("WARNING", logger="engram_api.embeddings.local"):
        auto = LocalEmbedder.load(compute="auto")
    try:
        assert auto.compute == "fp32"
        assert "computing in fp32 instead" in caplog.text
    finally:
        auto.close()
    with pytest.raises(EmbeddingConfigError, match="int8 rewrite gave sha256"):
        LocalEmbedder.load(compute="int8")
