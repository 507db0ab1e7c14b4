# ruff: noqa: RUF001  (Chinese text uses full-width punctuation)
"""Chinese memories through the real app over MCP, on the real models: the multilingual one
for meaning (opt-in: ``embeddings.primary.model``), the embedded default for lexical search."""

from __future__ import annotations

from collections.abc import Callable

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.settings import EngramSettings
from tests.engram_api.server.harness import call, serve

PREFERENCE = "用户喜欢简洁回复，不要列表，一定要带代码示例"
OTHERS = [
    ("部署服务的端口是 8080", "fact"),
    ("团队决定用 PostgreSQL 替换 MySQL", "decision"),
    ("周五下午不要安排任何会议", "preference"),
    ("The staging cluster runs Kubernetes 1.31", "fact"),
    ("发布流程：先跑测试，再打标签，最后执行 helm upgrade", "procedure"),
    ("我养了一只叫豆豆的猫", "fact"),
]


async def test_a_chinese_preference_is_found_by_a_chinese_paraphrase_and_an_english_question(
    make_settings: Callable[..., EngramSettings],
) -> None:
    e5 = ProviderSettings(model="multilingual-e5-small-q4")
    settings = make_settings(embeddings=EmbeddingSettings(primary=e5))
    async with serve(settings, startup_within=180) as running, running.client() as client:
        stored = await call(client, "mem0_add", content=PREFERENCE, scope="global",
                            mem_type="preference")  # fmt: skip
        assert stored["status"] == "stored"
        for content, mem_type in OTHERS:
            await call(client, "mem0_add", content=content, scope="global", mem_type=mem_type)
        for query in ("他希望我怎么回答问题？", "How does the user want answers to be written?"):
            found = await call(client, "mem0_search", query=query, scope="global", limit=3)
            assert found["results"][0]["id"] == stored["id"], (query, found["results"])
            assert found["results"][0]["content"] == PREFERENCE


async def test_a_chinese_keyword_finds_a_chinese_memory_by_lexical_search_alone(
    make_settings: Callable[..., EngramSettings],
) -> None:
    settings = make_settings(embeddings=EmbeddingSettings())
    settings = settings.model_copy(
        update={"store": settings.store.model_copy(update={"search_mode": "sparse"})}
    )
    async with serve(settings, startup_within=180) as running, running.client() as client:
        stored = await call(client, "mem0_add", content=PREFERENCE, scope="global")
        for content, _ in OTHERS:
            await call(client, "mem0_add", content=content, scope="global")
        found = await call(client, "mem0_search", query="代码示例", scope="global", limit=3)
    assert [r["id"] for r in found["results"]][:1] == [stored["id"]]
