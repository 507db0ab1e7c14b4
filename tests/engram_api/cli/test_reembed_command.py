"""`engram reembed`: switch embedding models without losing a memory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.engram_api.cli.test_memory_commands import engram


def test_a_collection_built_by_another_model_refuses_to_start_and_names_reembed(
    tmp_path: Path,
) -> None:
    assert engram(tmp_path, "add", "alpha fact", "--scope", "global").returncode == 0
    out = engram(tmp_path, "status", env={"ENGRAM_EMBEDDINGS__PRIMARY__DIMENSION": "128"})
    assert out.returncode == 2
    assert "engram reembed" in out.stderr


def test_reembed_copies_every_memory_switches_over_and_is_safe_to_rerun(tmp_path: Path) -> None:
    ids = []
    for i in range(7):
        added = engram(
            tmp_path, "--json", "add", f"memory number {i} about kites", "--scope", "global"
        )
        ids.append(json.loads(added.stdout)["id"])
    engram(tmp_path, "forget", ids[0], "--reason", "archived ones move too")
    new_model = {"ENGRAM_EMBEDDINGS__PRIMARY__DIMENSION": "128"}
    done = engram(tmp_path, "--json", "reembed", "--to", "hash", env=new_model)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["copied"], result["total"], result["switched"]) == (7, 7, True)
    assert result["model"] == "hash/128"

    listing = engram(tmp_path, "--json", "get-all", "--include-archived", env=new_model)
    assert listing.returncode == 0, listing.stderr
    assert sorted(r["id"] for r in json.loads(listing.stdout)["results"]) == sorted(ids)
    searched = engram(tmp_path, "--json", "search", "kites", env=new_model)
    assert searched.returncode == 0, searched.stderr
    assert json.loads(searched.stdout)["count"] == 5

    again = json.loads(engram(tmp_path, "--json", "reembed", "--to", "hash", env=new_model).stdout)
    assert (again["copied"], again["already_copied"]) == (0, 7)


def test_reembed_rejects_an_unknown_provider_by_name(tmp_path: Path) -> None:
    out = engram(tmp_path, "reembed", "--to", "word2vec")
    assert out.returncode == 2
    assert out.stderr.startswith("engram: error: --to:")
