"""The plots of bench/peers.py, run in a venv of their own with matplotlib (see peers.plot).

python plot.py RESULTS.json OUTDIR LIMIT     # prints the paths of the PNGs written
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

LIMIT = int(sys.argv[3]) if len(sys.argv) > 3 else 10


def plot(report: dict[str, Any], outdir: Path) -> list[Path]:
    results: dict[str, dict[str, dict[str, float]]] = report["latency"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, op in zip(axes, ("search", "add"), strict=True):
        for name, by_size in results.items():
            sizes = sorted(int(n) for n in by_size)
            p50 = [by_size[str(n)][f"{op}_p50"] for n in sizes]
            p99 = [by_size[str(n)][f"{op}_p99"] for n in sizes]
            (line,) = ax.plot(sizes, p50, marker="o", label=f"{name} p50")
            ax.plot(sizes, p99, marker="x", ls="--", color=line.get_color(), alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("memories in the store")
        ax.set_ylabel("ms (solid p50, dashed p99)")
        ax.set_title(f"{op}, one user of ten, limit {LIMIT}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Engram vs peers, one interleaved run (shared 2-core machine)", fontsize=10)
    fig.tight_layout()
    latency = outdir / "peers-latency.png"
    fig.savefig(latency, dpi=110)
    plt.close(fig)

    quality: dict[str, dict[str, dict[str, float]]] = report["quality"]
    corpora = sorted({c for v in quality.values() for c in v})
    fig, ax = plt.subplots(figsize=(7.5, 4))
    names = list(quality)
    bars = [(c, k) for c in corpora for k in ("R@5", "R@10")]
    width = 0.8 / max(len(names), 1)
    for j, name in enumerate(names):
        xs = [i + j * width for i in range(len(bars))]
        ys = [quality[name][c][k] for c, k in bars]
        rects = ax.bar(xs, ys, width, label=name)
        ax.bar_label(rects, fmt="%.2f", fontsize=7)
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(bars))])
    ax.set_xticklabels([f"{c}\n{k}" for c, k in bars], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("recall (LoCoMo, categories 1-4)")
    ax.set_title("Retrieval quality, each system's default search", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    recall_png = outdir / "peers-recall.png"
    fig.savefig(recall_png, dpi=110)
    plt.close(fig)
    return [latency, recall_png]


if __name__ == "__main__":
    for path in plot(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])):
        print(path)
