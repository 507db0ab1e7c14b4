"""Server commands: ``serve`` (MCP over HTTP), ``stdio`` (MCP over stdio), ``token create``."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import socket
import sys
from typing import Any

from engram_api.datadir import DataDirLock
from engram_api.errors import EngramError, InvalidInput
from engram_api.settings import EngramSettings, ServerSettings
from engram_contract.permissions import AGENT_NAME_RE, hash_token

TOKEN_PREFIX = "engram_"


class ServeFailed(EngramError):
    kind = "serve_failed"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "serve",
        help="serve MCP over HTTP at /mcp (+ /healthz /readyz; /metrics on its own port)",
        description=(
            "Serve the MCP tools over HTTP. Without tokens in the permission file it listens on "
            "loopback only and trusts the agent argument (default: --agent)."
        ),
    )
    s.add_argument("--host", help="address to bind (default 127.0.0.1; ENGRAM_SERVER__HOST)")
    s.add_argument("--port", type=int, help="port (default 8765; ENGRAM_SERVER__PORT)")
    s.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve a non-loopback address without authentication (anyone reaching the port "
        "can act as any agent)",
    )
    s.set_defaults(func=_serve)

    st = sub.add_parser(
        "stdio",
        help="serve MCP over stdin/stdout (for desktop clients)",
        description="Serve the MCP tools over stdio; the agent argument defaults to --agent.",
    )
    st.set_defaults(func=_stdio)

    t = sub.add_parser("token", help="agent tokens for running without the operator")
    tsub = t.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    c = tsub.add_parser(
        "create",
        help="print a new token once, and the hash line for the permission file",
    )
    c.add_argument("agent", help="the agent the token will act as")
    c.set_defaults(func=_token_create)


def _server_settings(settings: EngramSettings, args: argparse.Namespace) -> EngramSettings:
    overrides: dict[str, Any] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    if args.insecure_no_auth:
        overrides["insecure_no_auth"] = True
    if not overrides:
        return settings
    from pydantic import ValidationError

    try:
        server = ServerSettings.model_validate(settings.server.model_dump() | overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InvalidInput(f"--{err['loc'][0]}", err["msg"]) from None
    return settings.model_copy(update={"server": server})


def _refuse_if_held(settings: EngramSettings) -> None:
    """StoreLocked naming the holder (pid, address) if another process owns the data dir."""
    lock = DataDirLock(settings.data_dir)
    lock.acquire("engram (checking the data dir)")
    lock.release()


def _serve(settings: EngramSettings, args: argparse.Namespace) -> int:
    import uvicorn

    from engram_api.cli.owner import handlers
    from engram_api.runtime import load_permissions
    from engram_api.server.app import create_app
    from engram_api.server.auth import check_bind_safety
    from engram_api.server.logs import configure_logging

    settings = _server_settings(settings, args)
    # Refuse an open bind before touching logging or the data dir.
    check_bind_safety(settings, load_permissions(settings.permissions_file))
    # A second server names the one holding the data dir in one line, before uvicorn starts.
    _refuse_if_held(settings)
    configure_logging(settings.log_level)
    app = create_app(settings, default_agent=args.agent, control_handlers=handlers())
    config = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        log_config=None,
        access_log=False,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=10,
    )
    sockets = [config.bind_socket()]
    s = settings.server
    if s.metrics_port:
        try:
            sockets.append(listen(s.metrics_host, s.metrics_port))
        except OSError as exc:
            raise ServeFailed(
                f"server.metrics_port: cannot listen on {s.metrics_host}:{s.metrics_port} "
                f"({exc.strerror}); choose another port or 0 to turn /metrics off"
            ) from None
    server = uvicorn.Server(config)
    server.run(sockets=sockets)
    if not server.started:
        # The lifespan failed (uvicorn logged why) or the port could not be bound.
        raise ServeFailed(
            f"engram serve did not start on {settings.server.host}:{settings.server.port}; "
            "the log above says why"
        )
    return 0


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket (uvicorn serves every socket it is given with the same app)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _stdio(settings: EngramSettings, args: argparse.Namespace) -> int:
    from engram_api.cli.owner import handlers
    from engram_api.server.logs import configure_logging
    from engram_api.server.stdio import run_stdio

    _refuse_if_held(settings)
    configure_logging(settings.log_level)
    asyncio.run(run_stdio(settings, default_agent=args.agent, control_handlers=handlers()))
    return 0


def _token_create(settings: EngramSettings, args: argparse.Namespace) -> int:
    agent = args.agent
    if re.fullmatch(AGENT_NAME_RE, agent) is None:
        raise InvalidInput("agent", "must be 1-128 characters of A-Z a-z 0-9 . _ -")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    digest = hash_token(token)
    if args.json:
        print(json.dumps({"agent": agent, "token": token, "token_sha256": digest}))
        return 0
    print("New token (shown once; give it to the agent, e.g. as a Secret):")
    print(f"  {token}")
    print()
    print(f"Add its hash to agent '{agent}' in the permission file:")
    print("agents:")
    print(f"  {agent}:")
    print("    token_sha256:")
    print(f"      - {digest}")
    print(
        "The server picks the change up within seconds; clients send "
        "'Authorization: Bearer <token>'.",
        file=sys.stderr,
    )
    return 0
