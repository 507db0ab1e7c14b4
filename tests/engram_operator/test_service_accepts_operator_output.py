"""Operator and service agree: the ConfigMap and token Secret the real operator writes let the
real MCP service authenticate that agent and enforce exactly its permissions."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest

from engram_api.embeddings.config import EmbeddingSettings, ProviderSettings
from engram_api.settings import EngramSettings
from engram_contract.permissions import CONFIGMAP_KEY
from engram_operator.kube import CONFIGMAPS, ENGRAM_AGENTS, SECRETS
from tests.engram_api.server.harness import call, call_error, serve
from tests.engram_operator.kopf_harness import OPERATOR_NS, Cluster, eventually

pytestmark = pytest.mark.usefixtures("cluster")
NS = "team-a"


async def test_a_token_from_the_operators_secret_works_with_the_operators_configmap(
    cluster: Cluster, operator: Any, tmp_path: Path
) -> None:
    await cluster.create(
        ENGRAM_AGENTS,
        NS,
        {
            "apiVersion": "engram.dev/v1alpha1",
            "kind": "EngramAgent",
            "metadata": {"name": "writer"},
            "spec": {
                "read": ["global", "agent:writer"],
                "write": ["agent:writer"],
                "types": ["procedure", "task_log"],
                "operations": ["add", "search"],
                "maxTrust": "medium",
                "identity": {"token": {"enabled": True}},
                "release": "engram/engram",
            },
        },
    )

    async def written() -> tuple[str, str] | None:
        cm = await cluster.get(CONFIGMAPS, OPERATOR_NS, "engram-permissions")
        secret = await cluster.get(SECRETS, NS, "writer-engram-token")
        if cm is None or secret is None or "writer" not in cm["data"][CONFIGMAP_KEY]:
            return None
        return cm["data"][CONFIGMAP_KEY], base64.b64decode(secret["data"]["token"]).decode()

    config_text, token = await eventually(written, what="the ConfigMap and the token Secret")
    # What the kubelet does with the mounted ConfigMap: the key becomes a file.
    permissions = tmp_path / CONFIGMAP_KEY
    permissions.write_text(config_text, encoding="utf-8")
    settings = EngramSettings(
        data_dir=tmp_path / "data",
        permissions_file=permissions,
        embeddings=EmbeddingSettings(primary=ProviderSettings(provider="hash")),
    )
    async with serve(settings) as server:
        async with server.client(token) as client:
            added = await call(
                client,
                "mem0_add",
                content="deploy with make release",
                scope="agent:writer",
                mem_type="procedure",
                trust="high",
            )
            assert added["memory"]["agent"] == "writer"
            assert added["memory"]["trust"] == "medium"  # capped at the spec's maxTrust
            found = await call(client, "mem0_search", query="deploy release", scope="agent:writer")
            assert [r["id"] for r in found["results"]] == [added["id"]]
            denied_scope = await call_error(
                client, "mem0_add", content="a global fact", scope="global", mem_type="procedure"
            )
            assert "cannot write to scope 'global'" in denied_scope
            denied_type = await call_error(
                client, "mem0_add", content="x", scope="agent:writer", mem_type="fact"
            )
            assert "mem_type" in denied_type
            denied_op = await call_error(client, "mem0_status")
            assert "status" in denied_op
            spoofed = await call_error(
                client, "mem0_search", query="deploy", scope="agent:writer", agent="main"
            )
            assert "agent" in spoofed
        async with httpx.AsyncClient() as http:
            resp = await http.post(
                server.mcp_url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"authorization": f"Bearer {token}x", "accept": "application/json"},
            )
        assert resp.status_code == 401
