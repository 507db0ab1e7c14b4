"""``engram``: the command line for people, scripts and containers.

Exit codes: 0 success, 2 bad input or configuration (one line naming the field), 1 anything
that failed at run time (store down, data dir in use).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram_api.cli import (
    maintenance_commands,
    memory_commands,
    reembed_command,
    server_commands,
)
from engram_api.control import RemoteError
from engram_api.errors import EngramError, InvalidInput, PermissionDenied, SecretDetected
from engram_api.runtime import StartupError
from engram_api.settings import SettingsError, load_settings

_USAGE_ERRORS = (InvalidInput, PermissionDenied, SecretDetected, SettingsError, StartupError)
# Each module registers its own sub-commands (see engram_api.cli.base).
COMMAND_MODULES = [memory_commands, reembed_command, server_commands, maintenance_commands]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="engram", description="Long-term memory for AI agents.")
    p.add_argument("--config", type=Path, help="YAML settings file (or ENGRAM_CONFIG)")
    p.add_argument("--data-dir", type=Path, help="data directory (or ENGRAM_DATA_DIR)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--agent", default="main", help="act as this agent (default: main)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        overrides: dict[str, Any] = {}
        if args.data_dir:
            overrides["data_dir"] = args.data_dir
        settings = load_settings(args.config, **overrides)
        code: int = args.func(settings, args)
    except _USAGE_ERRORS as exc:
        print(f"engram: error: {exc}", file=sys.stderr)
        return 2
    except RemoteError as exc:
        # Refused or failed in the running server that ran the command for us.
        print(f"engram: error: {exc}", file=sys.stderr)
        return 2 if exc.usage else 1
    except EngramError as exc:
        print(f"engram: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
