"""Reports: one JSON file per run, the newest first, and a compact summary."""

from __future__ import annotations

import json
from pathlib import Path

from engram_api.maintenance.report import (
    MaintenanceReport,
    latest_reports,
    reports_dir,
    save_report,
)
from engram_contract.report import SUMMARY_MAX_BYTES, Task, parse_summary


def report(n: int, ids: int = 0) -> MaintenanceReport:
    r = MaintenanceReport(
        task=Task.daily,
        dry_run=False,
        collection="memories",
        store_kind="embedded",
        started_at=f"2026-01-01T00:00:{n:02d}Z",
    )
    s = r.step("dedup")
    s.count("merged", ids)
    s.count("archived", ids)
    s.add_ids("archived", [f"id-{i}" for i in range(ids)])
    for i in range(300):
        s.error(f"problem {i} " + "x" * 100)
    return r


def test_latest_reports_are_newest_first_with_id_lists_cut(tmp_path: Path) -> None:
    for n in range(4):
        save_report(tmp_path, report(n, ids=120), keep=3)
    (reports_dir(tmp_path) / "99999999T000000-daily-broken.json").write_text("{not json")
    got = latest_reports(tmp_path, 5, max_ids=10)
    assert [r["started_at"] for r in got] == [f"2026-01-01T00:00:{n:02d}Z" for n in (3, 2, 1)]
    step = got[0]["steps"][0]
    assert len(step["ids"]["archived"]) == 10
    assert step["ids_truncated"]["archived"] == 110
    saved = json.loads(sorted(reports_dir(tmp_path).glob("*T000003.*.json"))[0].read_text())
    assert len(saved["steps"][0]["ids"]["archived"]) == 120  # the file keeps every id
    assert saved["totals"]["merged"] == 120
    assert saved["totals"]["errors"] == 300
    assert saved["steps"][0]["errors_dropped"] == 100


def test_the_summary_line_fits_a_termination_message(tmp_path: Path) -> None:
    r = report(1, ids=100_000)
    r.message = "m" * 5000
    line = r.summary().to_line()
    assert len(line.encode()) <= SUMMARY_MAX_BYTES
    parsed = parse_summary("log line\n" + line)
    assert (parsed.merged, parsed.archived, parsed.errors) == (100_000, 100_000, 300)
    assert parsed.report_id == r.id
