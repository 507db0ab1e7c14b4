"""The operator's small Kubernetes client, against the emulated API server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import Configuration

from engram_operator.kube import (
    CONFIGMAPS,
    CRONJOBS,
    ENGRAM_AGENTS,
    SECRETS,
    Conflict,
    KubeApi,
)
from tests.engram_operator.kopf_harness import Cluster


@pytest.fixture
async def api(cluster: Cluster) -> AsyncIterator[KubeApi]:
    client = KubeApi(Configuration(host=cluster.url))
    yield client
    await client.close()


def test_paths_follow_the_api_conventions() -> None:
    assert CONFIGMAPS.path("ns", "cm") == "/api/v1/namespaces/ns/configmaps/cm"
    assert CRONJOBS.path("ns") == "/apis/batch/v1/namespaces/ns/cronjobs"
    assert ENGRAM_AGENTS.path("ns", "a", "status") == (
        "/apis/engram.dev/v1alpha1/namespaces/ns/engramagents/a/status"
    )
    assert ENGRAM_AGENTS.path() == "/apis/engram.dev/v1alpha1/engramagents"
    assert SECRETS.path("ns", "a/b") == "/api/v1/namespaces/ns/secrets/a%2Fb"


async def test_missing_objects_read_as_none_and_delete_as_false(api: KubeApi) -> None:
    assert await api.get(CONFIGMAPS, "ns", "absent") is None
    assert await api.delete(CONFIGMAPS, "ns", "absent") is False


async def test_create_get_patch_delete_round_trip(api: KubeApi, cluster: Cluster) -> None:
    created = await api.create(CONFIGMAPS, "ns", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    assert created["metadata"]["uid"]
    patched = await api.patch(CONFIGMAPS, "ns", "cm", {"data": {"b": "2"}})
    assert patched["data"] == {"a": "1", "b": "2"}
    fetched = await api.get(CONFIGMAPS, "ns", "cm")
    assert fetched is not None
    assert fetched["data"] == {"a": "1", "b": "2"}
    assert [item["metadata"]["name"] for item in await api.list_objects(CONFIGMAPS, "ns")] == ["cm"]
    assert await api.delete(CONFIGMAPS, "ns", "cm") is True
    assert await api.get(CONFIGMAPS, "ns", "cm") is None
    (patch,) = [req for req in cluster.operator_requests() if req.method.value == "PATCH"]
    assert patch.headers["Content-Type"] == "application/merge-patch+json"


async def test_list_sends_the_label_selector(api: KubeApi, cluster: Cluster) -> None:
    await api.list_objects(CONFIGMAPS, "ns", label_selector="a=b")
    (req,) = [r for r in cluster.operator_requests() if r.url.path.endswith("/configmaps")]
    assert req.params["labelSelector"] == "a=b"


async def test_a_conflict_error_never_repeats_the_request_body(api: KubeApi) -> None:
    secret = {"metadata": {"name": "s"}, "data": {"token": "c2VjcmV0LXRva2VuLXZhbHVl"}}
    await api.create(SECRETS, "ns", secret)
    with pytest.raises(Conflict) as caught:
        await api.create(SECRETS, "ns", secret)
    assert caught.value.status == 409
    assert "c2VjcmV0LXRva2VuLXZhbHVl" not in str(caught.value)
    assert "POST /api/v1/namespaces/ns/secrets: HTTP 409" in str(caught.value)
