"""The CLI prints Chinese as Chinese, not as \\u escapes, for people and with --json."""

from __future__ import annotations

from engram_api.cli.memory_commands import render

TEXT = "用户喜欢简洁回复"


def test_search_results_and_fields_print_chinese_readably() -> None:
    out = render(
        "search",
        {
            "results": [
                {"id": "1", "scope": "global", "mem_type": "preference", "trust": "medium",
                 "content": TEXT, "score": 0.9},
            ],
            "query": TEXT,
        },
    )  # fmt: skip
    assert out.count(TEXT) == 2
    assert "\\u" not in out


def test_a_stored_memory_prints_chinese_readably() -> None:
    out = render("add", {"status": "stored", "memory": {"content": TEXT}})
    assert TEXT in out
    assert "\\u" not in out
