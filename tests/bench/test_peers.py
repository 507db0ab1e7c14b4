"""The peers bench's non-timing logic: recall, parsing a peer's answer, the tables, the export."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import peers
from retrieval import Corpus, Doc

from engram_api.maintenance.portable import read_manifest, read_points


def test_recall_counts_the_gold_evidence_found_in_the_top_k() -> None:
    ranked = [{"D1:1"}, {"D1:9"}, {"D1:2", "D1:3"}]
    assert peers.recall({"D1:1", "D1:2"}, ranked, 1) == 0.5
    assert peers.recall({"D1:1", "D1:2"}, ranked, 2) == 0.5
    assert peers.recall({"D1:1", "D1:2"}, ranked, 10) == 1.0
    assert peers.recall({"D1:1"}, [], 5) == 0.0


def test_hits_are_scored_by_their_text_within_the_user_and_identical_texts_pool_evidence() -> None:
    corpus = Corpus(
        "observations",
        docs=[
            Doc("group:conv-1", "Caroline paints.", {"D1:1"}),
            Doc("group:conv-1", "Caroline paints.", {"D2:4"}),
            Doc("group:conv-2", "Caroline paints.", {"D9:9"}),
            Doc("group:conv-1", "Mel runs.", {"D1:2"}),
        ],
    )
    index = peers.evidence_index(corpus)
    assert index[("group:conv-1", "Caroline paints.")] == {"D1:1", "D2:4"}
    # A hit the corpus does not know (another user's text, a bench add) finds nothing.
    r5, r10 = peers.score_hits(
        index, "group:conv-1", {"D2:4", "D1:2"}, ["unknown", "Caroline paints."]
    )
    assert (r5, r10) == (0.5, 0.5)


def test_qdrant_find_answers_are_parsed_into_the_stored_texts_in_rank_order() -> None:
    # The shape mcp-server-qdrant 0.8.1 answers: a JSON list, a header, then <entry>s.
    text = (
        "[\n  \"Results for the query 'what does caroline like'\",\n"
        '  "<entry><content>Caroline likes pottery</content><metadata>{\\"user\\": \\"u1\\"}'
        '</metadata></entry>",\n'
        '  "<entry><content>Caroline\\nplays <b>guitar</b></content><metadata></metadata>'
        '</entry>"\n]'
    )
    assert peers.parse_qdrant_find(text) == [
        "Caroline likes pottery",
        "Caroline\nplays <b>guitar</b>",
    ]
    assert peers.parse_qdrant_find("") == []
    assert peers.parse_qdrant_find("null") == []


def test_every_system_goes_first_equally_often() -> None:
    names = ["Engram", "mem0", "mcp-server-qdrant"]
    firsts = [peers.rotation(names, i)[0] for i in range(9)]
    assert {n: firsts.count(n) for n in names} == dict.fromkeys(names, 3)
    assert sorted(peers.rotation(names, 4)) == sorted(names)


def row(search: float, **kw: float) -> dict[str, float]:
    base = {
        "search_p50": search,
        "search_p99": search * 2,
        "add_p50": 5.0,
        "add_p99": 9.0,
        "bulk_per_s": 100.0,
        "rss_mb": 300.0,
        "disk_mb": 10.0,
        "fill_s": 1.0,
        "queries": 200,
        "queries_planned": 200,
    }
    return base | kw


def test_the_table_puts_each_peer_figure_beside_its_ratio_to_engram() -> None:
    results = {
        "Engram": {10_000: row(8.0)},
        "mem0": {10_000: row(120.0, bulk_per_s=50.0)},
        "mcp-server-qdrant": {10_000: row(2500.0, queries=30)},
    }
    table = peers.latency_table(results).splitlines()
    assert table[0].startswith("| memories | system | search p50 ms |")
    engram, mem0, qdrant = table[2:]
    assert "| 8.0 |" in engram
    assert "(" not in engram  # the baseline has no ratio to itself
    assert "| 120.0 (15.0x) |" in mem0
    assert "| 50 (0.50x) |" in mem0  # bulk: half Engram's rate
    # A peer that ran a reduced query count says so in its row.
    assert "mcp-server-qdrant (30 queries)" in qdrant


def test_goals_say_met_or_not_met_with_the_figure() -> None:
    results = {
        "Engram": {1_000: row(5.0), 10_000: row(10.0)},
        "mem0": {1_000: row(20.0), 10_000: row(90.0)},
        "mcp-server-qdrant": {1_000: row(4.0), 10_000: row(50.0)},
    }
    quality = {
        "Engram": {"turns": {"R@5": 0.5, "R@10": 0.6}},
        "mem0": {"turns": {"R@5": 0.4, "R@10": 0.45}},
        "mcp-server-qdrant": {"turns": {"R@5": 0.5, "R@10": 0.62}},
    }
    got = peers.goals(results, quality)
    assert "search p50 >= 10x faster than mem0 at 10,000: 9.0x, NOT met" in got
    assert not any("mem0 at 1,000" in g for g in got)  # the goal starts at 10k
    assert "search p50 faster than mcp-server-qdrant at 1,000: 0.8x, NOT met" in got
    assert "search p50 faster than mcp-server-qdrant at 10,000: 5.0x, met" in got
    assert "R@10 ahead of mem0 on LoCoMo turns: +0.150, met" in got
    assert "R@10 ahead of mcp-server-qdrant on LoCoMo turns: -0.020, NOT met" in got
    table = peers.quality_table(quality)
    assert "| mem0 | 0.400 (-0.100) | 0.450 (-0.150) |" in table


def test_the_fill_export_is_one_engram_reads_back_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((3, 384)).astype(np.float32)
    texts = ["Caroline paints.", "Mel runs.", "卡罗琳喜欢画画。"]
    peers.write_engram_export(tmp_path / "x", texts, vectors, ["u0", "u1", "u0"])
    manifest = read_manifest(tmp_path / "x")  # checks format, version and checksum
    assert manifest.count == 3
    assert manifest.dimension == 384
    points = list(read_points(tmp_path / "x", 384))
    assert [p[1]["content"] for p in points] == texts
    assert [p[1]["scope"] for p in points] == ["group:u0", "group:u1", "group:u0"]
    np.testing.assert_array_equal(np.stack([p[2] for p in points]), vectors)


def test_disk_counts_allocated_bytes_and_rss_covers_this_process(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    with (tmp_path / "sparse").open("wb") as f:
        f.truncate(50 * 2**20)  # apparent 50 MB, nothing allocated
    assert 0.09 < peers.disk_mb(tmp_path) < 1.0
    assert peers.tree_rss_mb(os.getpid()) > 10


@pytest.mark.parametrize("dist", ["mem0", "qdrant-mcp"])
def test_each_peer_is_pinned_into_its_own_venv_outside_the_repo(dist: str) -> None:
    spec = peers.PEERS[dist]
    assert all("==" in r for r in spec.requirements)
    assert peers.ROOT not in spec.venv.parents
    assert spec.venv.name.startswith(f"{dist}-")


def test_the_plots_are_written_as_png_files(tmp_path: Path) -> None:
    spec = peers.PEERS["plots"]
    if not (spec.venv / ".bench-installed").exists():
        pytest.skip(f"matplotlib's venv ({spec.venv}) is made by the first bench/peers.py run")
    report = {
        "latency": {
            "Engram": {"1000": row(5.0), "10000": row(6.0)},
            "mem0": {"1000": row(50.0), "10000": row(120.0)},
        },
        "quality": {
            "Engram": {"observations": {"R@5": 0.6, "R@10": 0.7}},
            "mem0": {"observations": {"R@5": 0.55, "R@10": 0.66}},
        },
    }
    pngs = peers.plot(report, tmp_path)
    assert [p.name for p in pngs] == ["peers-latency.png", "peers-recall.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
