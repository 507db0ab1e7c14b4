"""``engram-operator`` / ``python -m engram_operator``: settings, logging, cluster access, run."""

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

from engram_operator.runner import run
from engram_operator.settings import OperatorSettings, settings_problems


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


def main() -> int:
    try:
        settings = OperatorSettings()  # type: ignore[call-arg]  # required fields come from env
    except ValidationError as exc:
        for problem in settings_problems(exc):
            print(f"engram-operator: {problem}", file=sys.stderr)
        return 2
    configure_logging(settings)
    asyncio.run(_serve(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
