"""``engram-operator`` / ``python -m engram_operator``: settings, logging, cluster access, run.

``engram-operator uninstall [--timeout SECONDS]`` is the chart's pre-delete hook (uninstall.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

import kopf
from kubernetes.aio import config as kube_config_loader
from kubernetes.aio.client import Configuration
from pydantic import ValidationError

from engram_operator.kube import KubeApi
from engram_operator.runner import run
from engram_operator.settings import OperatorSettings, settings_problems
from engram_operator.uninstall import uninstall

# How long the pre-delete hook waits for the operator to let its resources go.
DEFAULT_UNINSTALL_TIMEOUT_S = 120.0


async def load_kube_configuration() -> Configuration:
    """In a pod: the ServiceAccount; elsewhere: the current kubeconfig context."""
    configuration = Configuration()
    # The loaders are untyped; they fill `configuration` in place.
    loader: Any = kube_config_loader
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        loader.load_incluster_config(client_configuration=configuration)
    else:
        await loader.load_kube_config(client_configuration=configuration, persist_config=False)
    return configuration


def configure_logging(settings: OperatorSettings) -> None:
    kopf.configure(
        verbose=settings.log_level == "DEBUG",
        log_format=kopf.LogFormat.JSON if settings.log_format == "json" else kopf.LogFormat.FULL,
    )
    logging.getLogger().setLevel(settings.log_level)


async def _serve(settings: OperatorSettings) -> None:
    await run(
        settings,
        kube_config=await load_kube_configuration(),
        login=kopf.login_via_client,
        liveness_endpoint=f"http://{settings.health_host}:{settings.health_port}/healthz",
    )


async def _uninstall(settings: OperatorSettings, wait_s: float) -> int:
    api = KubeApi(await load_kube_configuration())
    try:
        outcome = await uninstall(api, settings, wait_s=wait_s)
    finally:
        await api.close()
    for ref in outcome.deleted:
        print(f"engram-operator: deleted {ref}")
    for ref in outcome.released:
        print(f"engram-operator: the operator did not finish {ref}; removed its finalizer")
    for problem in outcome.failed:
        print(f"engram-operator: could not clean up {problem}", file=sys.stderr)
    return 1 if outcome.failed else 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args and not args[0].startswith("-") else "run"
    timeout = DEFAULT_UNINSTALL_TIMEOUT_S
    if command not in ("run", "uninstall") or (args and args[0] != "--timeout"):
        print("usage: engram-operator [uninstall [--timeout SECONDS]]", file=sys.stderr)
        return 2
    if args:
        try:
            timeout = float(args[1])
        except (IndexError, ValueError):
            print("engram-operator: --timeout needs a number of seconds", file=sys.stderr)
            return 2
    try:
        settings = OperatorSettings()  # type: ignore[call-arg]  # required fields come from env
    except ValidationError as exc:
        for problem in settings_problems(exc):
            print(f"engram-operator: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings)
    if command == "uninstall":
        return asyncio.run(_uninstall(settings, timeout))
    asyncio.run(_serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
