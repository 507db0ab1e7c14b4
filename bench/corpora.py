"""Text corpora for the benches: as many memories as asked for, and queries to search them.

- `spliced`: memories in LoCoMo's own words (realistic vocabulary, lengths, vector geometry);
  `questions`: LoCoMo's questions, real queries for it.
- `synth`: the narrow corpus, word salads over 39 ops words. Every query word is in ~25 % of
  all memories (the worst case for BM25), and LoCoMo's questions match none of it closely (the
  hard case for a graph walk).

LoCoMo is read in place from ../shared/data (CC BY-NC 4.0: never copied into this repo).
"""

from __future__ import annotations

import functools

import numpy as np
from retrieval import DATA, Corpus, load

WORDS = [
    "deploy",
    "helm",
    "chart",
    "postgres",
    "redis",
    "cluster",
    "staging",
    "prod",
    "user",
    "prefers",
    "dark",
    "mode",
    "tea",
    "coffee",
    "meeting",
    "monday",
    "release",
    "branch",
    "review",
    "lint",
    "test",
    "flaky",
    "timeout",
    "retry",
    "queue",
    "backup",
    "restore",
    "kubernetes",
    "node",
    "pod",
    "secret",
    "rotate",
    "vault",
    "dashboard",
    "metrics",
    "alert",
    "pager",
    "oncall",
    "runbook",
]


@functools.cache
def _locomo() -> tuple[Corpus, Corpus]:
    # Parsed once per run: a bench asks for memories and questions at every size.
    return load(DATA)


def synth(n: int, seed: int) -> list[str]:
    """The narrow corpus: word salads over WORDS, each word in ~25% of all memories."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(6, 16)))) + f" #{i}" for i in range(n)]


def spliced(n: int, seed: int) -> list[str]:
    """n distinct memories in LoCoMo's own words: the head of one turn or fact, the tail of another.

    LoCoMo holds ~8,400 texts; splicing keeps their vocabulary, word frequencies and lengths
    (so BM25 posting lists and the model's vector geometry look like real memories) while
    giving as many distinct texts as asked for. Read in place, never copied (CC BY-NC 4.0).
    """
    obs, turns = _locomo()
    words = [d.text.split() for d in obs.docs + turns.docs]
    words = [w for w in words if len(w) >= 4]
    rng = np.random.default_rng(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        a, b = rng.integers(0, len(words), size=2)
        head, tail = words[a], words[b]
        text = " ".join(head[: len(head) // 2] + tail[len(tail) // 2 :])
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def questions(n: int, seed: int) -> list[str]:
    """n of LoCoMo's questions (1,986), shuffled: real queries for the spliced corpus."""
    obs, turns = _locomo()
    qs = sorted({q.text for q in turns.questions + obs.questions})
    if n > len(qs):
        raise SystemExit(f"LoCoMo has {len(qs):,} distinct questions, {n:,} were asked for")
    order = np.random.default_rng(seed).permutation(len(qs))[:n]
    return [qs[i] for i in order]
