"""An OpenAI-compatible embedding server on loopback, for outage drills.

Serves ``POST /v1/embeddings`` with Engram's hashing vectors (384-d, deterministic), in the
wire format the openai SDK sends (float lists or base64). It is a separate process so that an
outage is real: killing it closes the port and the service sees connections refused, exactly
as when a provider goes away.

    .venv/bin/python bench/embed_server.py --port 18080
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engram_api.embeddings.hashing import HashingEmbedder

MODEL = "hash-over-http"
DIMENSION = 384


class _Handler(BaseHTTPRequestHandler):
    embedder = HashingEmbedder(DIMENSION)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.rstrip("/") != "/v1/embeddings":
            self._send(404, {"error": {"message": "not found"}})
            return
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        data = []
        for i, text in enumerate(texts):
            vec = [float(x) for x in self.embedder.embed_one(str(text))]
            if body.get("encoding_format") == "base64":
                packed = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
                data.append({"object": "embedding", "index": i, "embedding": packed})
            else:
                data.append({"object": "embedding", "index": i, "embedding": vec})
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", MODEL),
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
