"""Memory commands: add, search, get, get-all, status, forget, restore-memory, queue."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from typing import Any

from engram_api.cli.base import Command
from engram_api.runtime import Engine
from engram_api.settings import EngramSettings

Handler = Callable[[Engine, argparse.Namespace], Awaitable[dict[str, Any]]]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    a = sub.add_parser("add", help="store a memory")
    a.add_argument("content")
    a.add_argument("--scope", required=True)
    a.add_argument("--type", dest="mem_type", default="fact")
    a.add_argument("--trust", default="medium")
    a.add_argument("--source", default="agent_output")
    a.add_argument("--context", default="")

    s = sub.add_parser("search", help="search memories")
    s.add_argument("query")
    s.add_argument("--scope", default="global")
    s.add_argument("--type", dest="mem_type")
    s.add_argument("--trust-min")
    s.add_argument("--limit", type=int, default=5)

    one = sub.add_parser("get", help="print one memory, archived or not")
    one.add_argument("id")

    g = sub.add_parser("get-all", help="list memories page by page")
    g.add_argument("--scope")
    g.add_argument("--type", dest="mem_type")
    g.add_argument("--cursor")
    g.add_argument("--limit", type=int, default=50)
    g.add_argument("--include-archived", action="store_true")

    sub.add_parser("status", help="counts, store and queue health")

    f = sub.add_parser("forget", help="archive a memory (restorable)")
    f.add_argument("id")
    f.add_argument("--reason", required=True)

    r = sub.add_parser("restore-memory", help="un-archive a memory")
    r.add_argument("id")

    q = sub.add_parser("queue", help="the durable write queue")
    q.add_argument("action", choices=["list", "dead", "retry", "replay"])
    q.add_argument("write_ids", nargs="*", help="for retry: only these dead letters")
    for name, handler in HANDLERS.items():
        sub.choices[name].set_defaults(func=_runner(handler))


async def _add(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    return await e.service.add(
        agent=a.agent,
        content=a.content,
        scope=a.scope,
        mem_type=a.mem_type,
        trust=a.trust,
        source=a.source,
        context=a.context,
    )


async def _search(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    return await e.service.search(
        agent=a.agent,
        query=a.query,
        scope=a.scope,
        mem_type=a.mem_type,
        trust_min=a.trust_min,
        limit=a.limit,
    )


async def _get(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    return await e.service.get(agent=a.agent, memory_id=a.id)


async def _get_all(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    return await e.service.get_all(
        agent=a.agent,
        scope=a.scope,
        mem_type=a.mem_type,
        cursor=a.cursor,
        limit=a.limit,
        include_archived=a.include_archived,
    )


async def _status(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    return await e.service.status(agent=a.agent)


async def _forget(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    return await e.service.forget(agent=a.agent, memory_id=a.id, reason=a.reason)


async def _restore(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    return await e.service.restore(agent=a.agent, memory_id=a.id)


async def _queue(e: Engine, a: argparse.Namespace) -> dict[str, Any]:
    if a.action == "list":
        entries = e.queue.entries()
        return {
            "results": [
                {"write_id": x.write_id, "scope": x.body.get("scope"), "attempts": x.attempts}
                for x in entries
            ],
            **await e.queue.stats(),
        }
    if a.action == "dead":
        return {"results": e.queue.dead_letters()}
    if a.action == "retry":
        moved = e.queue.retry_dead(a.write_ids or None)
        stored = await e.queue.drain()
        return {"moved_back": moved, "stored": stored, **await e.queue.stats()}
    stored = await e.queue.drain()
    return {"stored": stored, **await e.queue.stats()}


HANDLERS: dict[str, Handler] = {
    "add": _add,
    "search": _search,
    "get": _get,
    "get-all": _get_all,
    "status": _status,
    "forget": _forget,
    "restore-memory": _restore,
    "queue": _queue,
}


def render(command: str, result: dict[str, Any]) -> str:
    """Readable output for people; --json gives the full structure."""
    rows = result.get("results")
    if isinstance(rows, list):
        lines = []
        for r in rows:
            if "content" in r:
                score = f"{r['score']:.3f} " if "score" in r else ""
                lines.append(
                    f"{score}{r['id']}  [{r['scope']} {r['mem_type']} {r['trust']}]  {r['content']}"
                )
            else:
                lines.append("  ".join(f"{k}={v}" for k, v in r.items()))
        extra = {k: v for k, v in result.items() if k != "results"}
        footer = "  ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in extra.items())
        return "\n".join([*lines, footer] if lines else ["(no results)", footer])
    return "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in result.items())


def _runner(handler: Handler) -> Command:
    def run(settings: EngramSettings, args: argparse.Namespace) -> int:
        # Beside a running server, the server runs it (cli.owner).
        from engram_api.cli.owner import run_here_or_in_owner

        result = run_here_or_in_owner(settings, args, handler)
        print(
            json.dumps(result, indent=2, ensure_ascii=False)
            if args.json
            else render(args.command, result)
        )
        return 0

    return run
