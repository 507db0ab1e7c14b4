"""The reliability drills of bench/reliability.py, at sizes the suite can afford.

Real processes over real HTTP: `engram serve`, an embedding provider that is killed and
started again, a kill -9 of the service while it replays its queue.
"""

from __future__ import annotations

from pathlib import Path

from bench.reliability import mixed, outage


async def test_an_embedder_outage_and_a_kill_9_mid_replay_lose_and_duplicate_nothing(
    tmp_path: Path,
) -> None:
    result = await outage(adds=400, outage_s=2.0, workers=4, workdir=tmp_path)
    assert result["acknowledged"] == 400
    assert result["queued_acks"] > 0, "the outage must have queued some writes"
    assert result["queue_depth_at_kill"] > 0, "the kill must land while writes are queued"
    assert (result["stored"], result["lost"], result["duplicated"]) == (400, 0, 0)
    assert (result["dead_letters"], result["queue_depth_after"]) == (0, 0)


async def test_concurrent_clients_calling_every_tool_see_no_errors(tmp_path: Path) -> None:
    result = await mixed(clients=10, seconds=5.0, workdir=tmp_path)
    assert result["errors"] == 0, result["first_errors"]
    assert set(result["per_tool"]) >= {"mem0_add", "mem0_search", "mem0_get_all", "mem0_status"}
