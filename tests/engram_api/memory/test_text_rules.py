"""Text that is not valid Unicode is refused by the engine itself (the CLI reaches it with
argv strings, which carry undecodable bytes as lone surrogates), naming the field."""

from __future__ import annotations

import pytest

from engram_api.errors import InvalidInput
from engram_api.memory.model import BAD_TEXT_RULE
from engram_api.memory.service import MemoryService
from engram_api.store.base import Match


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("content", {"content": "caf\udce9 menu", "scope": "global"}),
        ("context", {"content": "menu", "scope": "global", "context": "nul\x00"}),
    ],
)
async def test_add_refuses_lone_surrogates_and_nul_and_stores_nothing(
    service: MemoryService, field: str, kwargs: dict[str, str]
) -> None:
    with pytest.raises(InvalidInput) as raised:
        await service.add(agent="main", **kwargs)
    assert raised.value.field == field
    assert raised.value.rule == BAD_TEXT_RULE
    assert await service.store.count(Match(archived=None)) == 0


async def test_search_and_forget_refuse_invalid_text_by_field(service: MemoryService) -> None:
    with pytest.raises(InvalidInput, match=r"^query: must be valid Unicode"):
        await service.search(agent="main", query="\ud800")
    mem = await service.add(agent="main", content="the VPN host moved", scope="global")
    with pytest.raises(InvalidInput, match=r"^reason: must be valid Unicode"):
        await service.forget(agent="main", memory_id=mem["id"], reason="bye \udfff")
