"""helm and kubectl, run as the real binaries against the test control plane."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "engram"
CLI_TIMEOUT_S = 120.0


class CliError(AssertionError):
    pass


@dataclass(frozen=True)
class Clis:
    bin_dir: Path
    kubeconfig: Path
    home: Path

    def _env(self, kubeconfig: Path | None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "KUBECONFIG": str(kubeconfig or self.kubeconfig),
            # Keep helm's repository cache and plugins out of the user's home.
            "HELM_CACHE_HOME": str(self.home / "helm-cache"),
            "HELM_CONFIG_HOME": str(self.home / "helm-config"),
            "HELM_DATA_HOME": str(self.home / "helm-data"),
        }
        return env

    def run(
        self,
        tool: str,
        args: Sequence[str],
        *,
        stdin: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = CLI_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin_dir / tool), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self._env(kubeconfig),
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise CliError(
                f"{tool} {' '.join(args)} exited {done.returncode}:\n{done.stderr}{done.stdout}"
            )
        return done

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", args, **kwargs)

    def helm(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("helm", args, **kwargs)

    def kubectl_json(self, *args: str, **kwargs: Any) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", **kwargs).stdout)
