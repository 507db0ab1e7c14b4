"""The MCP tools: thin wrappers over the memory engine.

Names, parameter names and defaults follow the prototype so existing agent prompts keep
working (``mem0_get_all`` dropped ``user_id`` and gained ``cursor``/``limit``; ``mem0_forget``
is new). Every check lives in the engine; these functions only pass arguments through
:class:`~engram_api.server.calls.ToolRuntime`, which adds identity, logging and metrics.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from engram_api import __version__
from engram_api.memory.model import Source
from engram_api.server.arguments import bad_text
from engram_api.server.arguments import describe as describe_invalid
from engram_api.server.calls import ToolRuntime
from engram_api.server.maintenance_tool import MODES, maintenance
from engram_contract.permissions import MemType, Trust

INSTRUCTIONS: Final = (
    "Engram is long-term memory shared by agents. Search it (mem0_search) before asking the "
    "user for something they may have said before, and store durable knowledge (mem0_add) when "
    "you learn it: preferences, facts, decisions, lessons, procedures. One self-contained "
    "statement per memory. Never store secrets (keys, passwords, tokens): store where they "
    "live instead. Errors name the argument to fix."
)

ToolFn = TypeVar("ToolFn", bound=Callable[..., Awaitable[dict[str, Any]]])
_TYPES: Final = [t.value for t in MemType]
_TRUSTS: Final = [t.value for t in Trust]
_SOURCES: Final = [s.value for s in Source]
_TYPES_TEXT: Final = ", ".join(_TYPES)

Agent = Annotated[
    str | None,
    Field(
        description=(
            "Your agent name. Optional: with a token the server already knows who you are (if "
            "given it must match); on a local server it picks the agent whose permissions "
            "apply (default 'main')."
        ),
    ),
]
WriteScope = Annotated[
    str,
    Field(
        description=(
            "Where the memory lives: 'global' (everyone), 'group:<id>' (a team or chat), 'dm' "
            "or 'dm:<id>' (direct messages), 'agent:<name>' (one agent's own notes)."
        ),
    ),
]
MemTypeArg = Annotated[
    str,
    Field(
        description=(
            "Kind of memory: preference, fact, procedure, lesson, decision, task_log, knowledge."
        ),
        json_schema_extra={"enum": _TYPES},
    ),
]
TypeFilter = Annotated[
    str | None,
    Field(description=f"Only memories of this type ({_TYPES_TEXT}); omit for all types."),
]
SearchLimit = Annotated[int, Field(description="Most results to return (1-50).")]


def _ro(title: str) -> ToolAnnotations:
    return ToolAnnotations(
        title=title, read_only_hint=True, destructive_hint=False, open_world_hint=False
    )


def describe(fn: Callable[..., Any]) -> str:
    """The docstring as the model reads it: paragraphs unwrapped, indentation gone."""
    paragraphs = inspect.cleandoc(fn.__doc__ or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _tool(
    mcp: MCPServer[Any], *, name: str, annotations: ToolAnnotations
) -> Callable[[ToolFn], ToolFn]:
    def register(fn: ToolFn) -> ToolFn:
        mcp.add_tool(fn, name=name, description=describe(fn), annotations=annotations)
        return fn

    return register


def register_tools(mcp: MCPServer[Any], rt: ToolRuntime) -> None:
    @_tool(
        mcp,
        name="mem0_add",
        annotations=ToolAnnotations(
            title="Store a memory",
            read_only_hint=False,
            destructive_hint=False,
            # An exact duplicate in the same scope and type is answered, not stored twice.
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def mem0_add(
        content: Annotated[
            str,
            Field(
                description=(
                    "The memory: one self-contained statement in plain language, e.g. 'User "
                    "prefers dark mode in every editor'. No secrets."
                )
            ),
        ],
        scope: WriteScope,
        ctx: Context[Any, Any],
        mem_type: MemTypeArg = "fact",
        source: Annotated[
            str,
            Field(
                description=(
                    "Where it came from: agent_output (your own conclusion), tool_result, "
                    "inferred, or user_direct (the user said it; only some agents may claim it)."
                ),
                json_schema_extra={"enum": _SOURCES},
            ),
        ] = "agent_output",
        trust: Annotated[
            str,
            Field(
                description=(
                    "How reliable it is: low, medium or high. Capped at the most your agent may "
                    "set; the answer says when it was lowered."
                ),
                json_schema_extra={"enum": _TRUSTS},
            ),
        ] = "medium",
        context: Annotated[
            str,
            Field(description="Optional extra context that helps find it later (searched too)."),
        ] = "",
        agent: Agent = None,
    ) -> dict[str, Any]:
        """Store one memory so that you and other agents with access to its scope can recall it
        later.

        Write one durable, self-contained statement per call: a preference, fact, decision,
        lesson, procedure, task log or piece of knowledge. Secrets (API keys, passwords, tokens)
        are refused: store where a secret lives, never the secret. Returns the stored memory
        with its id (status 'stored', or 'duplicate' when the same text is already in that
        scope and type). If storage is briefly down the write is queued instead
        ({"queued": true, "write_id": ...}) and stored automatically later; nothing is lost.
        """
        return await rt.call(
            "mem0_add",
            ctx,
            agent,
            lambda who: rt.service.add(
                agent=who,
                content=content,
                scope=scope,
                mem_type=mem_type,
                source=source,
                trust=trust,
                context=context,
            ),
            scope=scope,
        )

    @_tool(mcp, name="mem0_search", annotations=_ro("Search memories"))
    async def mem0_search(
        query: Annotated[str, Field(description="What you want to recall, in natural language.")],
        ctx: Context[Any, Any],
        scope: Annotated[
            str,
            Field(
                description=(
                    "Scope to search: 'global', 'group:<id>', 'dm', 'dm:<id>', 'agent:<name>'; "
                    "'all' for every scope you may read; 'cross:<group-id>' for that group plus "
                    "global. Any scope other than global is searched together with global."
                )
            ),
        ] = "global",
        mem_type: TypeFilter = None,
        trust_min: Annotated[
            str | None,
            Field(description="Only memories at least this trusted: low, medium or high."),
        ] = None,
        limit: SearchLimit = 5,
        agent: Agent = None,
    ) -> dict[str, Any]:
        """Find the memories most relevant to a query.

        The scope and global are searched concurrently and merged by relevance; trust only
        breaks ties and filters (trust_min). Each result has content, scope, mem_type, trust,
        source, agent, created_at, score and id. The answer echoes scopes_searched;
        degraded=true means part of the search could not run, and reason says why.
        """
        return await rt.call(
            "mem0_search",
            ctx,
            agent,
            lambda who: rt.service.search(
                agent=who,
                query=query,
                scope=scope,
                mem_type=mem_type or None,
                trust_min=trust_min or None,
                limit=limit,
            ),
            scope=scope,
        )

    @_tool(mcp, name="mem0_get_all", annotations=_ro("List memories"))
    async def mem0_get_all(
        ctx: Context[Any, Any],
        scope: Annotated[
            str | None,
            Field(description="Only this scope; omit for every scope you may read."),
        ] = None,
        mem_type: TypeFilter = None,
        cursor: Annotated[
            str | None,
            Field(description="next_cursor from the previous page; omit for the first page."),
        ] = None,
        limit: Annotated[int, Field(description="Memories per page (1-200).")] = 50,
        include_archived: Annotated[
            bool, Field(description="Also list archived (forgotten or superseded) memories.")
        ] = False,
        agent: Agent = None,
    ) -> dict[str, Any]:
        """List memories page by page, for an inventory or a review.

        Returns results, count, total (all matching memories) and next_cursor; pass
        next_cursor back as cursor for the next page (null means this was the last page).
        Use mem0_search to find something specific.
        """
        return await rt.call(
            "mem0_get_all",
            ctx,
            agent,
            lambda who: rt.service.get_all(
                agent=who,
                scope=scope or None,
                mem_type=mem_type or None,
                cursor=cursor or None,
                limit=limit,
                include_archived=include_archived,
            ),
            scope=scope,
        )

    @_tool(mcp, name="mem0_status", annotations=_ro("Memory status"))
    async def mem0_status(ctx: Context[Any, Any], agent: Agent = None) -> dict[str, Any]:
        """Health and inventory of the memory store as far as you may read it.

        Returns store readiness, active and archived counts, counts by scope, type and trust
        (only scopes you may read), the write queue (depth, dead letters) and the embedding
        model.
        """
        return await rt.call("mem0_status", ctx, agent, lambda who: rt.service.status(agent=who))

    @_tool(
        mcp,
        name="mem0_maintenance",
        annotations=ToolAnnotations(
            title="Memory maintenance",
            read_only_hint=False,
            # daily/weekly merge duplicates and archive decayed memories (restorable).
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    async def mem0_maintenance(
        ctx: Context[Any, Any],
        mode: Annotated[
            str,
            Field(
                description=(
                    "report_only (default): the latest maintenance reports. daily or weekly: "
                    "run maintenance now (needs the maintenance permission)."
                ),
                json_schema_extra={"enum": list(MODES)},
            ),
        ] = "report_only",
        dry_run: Annotated[
            bool,
            Field(description="For daily/weekly: report what would change, change nothing."),
        ] = False,
        agent: Agent = None,
    ) -> dict[str, Any]:
        """Maintenance reports, or a maintenance run.

        With mode='report_only' (the default) returns the latest reports of the scheduled
        maintenance: duplicates merged, conflicts resolved, task logs consolidated, memories
        decayed and archived, backups. daily and weekly run that maintenance now; they need the
        'maintenance' permission.
        """

        return await rt.call(
            "mem0_maintenance",
            ctx,
            agent,
            lambda who: maintenance(rt.require_engine(), agent=who, mode=mode, dry_run=dry_run),
        )

    @_tool(
        mcp,
        name="mem0_forget",
        annotations=ToolAnnotations(
            title="Forget a memory",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def mem0_forget(
        memory_id: Annotated[
            str,
            Field(description="The id of the memory, as returned by mem0_search or mem0_add."),
        ],
        reason: Annotated[
            str,
            Field(description="Why it should be forgotten, e.g. 'outdated: moved to Postgres'."),
        ],
        ctx: Context[Any, Any],
        agent: Agent = None,
    ) -> dict[str, Any]:
        """Forget a memory that is wrong, outdated or was stored by mistake.

        The memory is archived, not erased: it no longer appears in search or listings, and an
        operator can restore it. You need write access to its scope.
        """
        return await rt.call(
            "mem0_forget",
            ctx,
            agent,
            lambda who: rt.service.forget(agent=who, memory_id=memory_id, reason=reason),
        )


class EngramMCP(MCPServer[Any]):
    """The SDK's server with arguments checked our way before a tool runs (see
    :mod:`engram_api.server.arguments`): a bad one gets ``field: rule``, a log line and a
    metric, like every other refused call."""

    def __init__(self, rt: ToolRuntime, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rt = rt

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[Any, Any] | None = None,
    ) -> Any:
        if name not in KNOWN_TOOLS:
            return await super().call_tool(name, arguments, context)
        if (problem := bad_text(arguments)) is not None:
            raise ToolError(self._rt.reject_arguments(name, context, problem))
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(
                    self._rt.reject_arguments(name, context, describe_invalid(exc.__cause__))
                ) from None
            # The SDK prefixes our message with "Error executing tool <name>: "; the model
            # should read the field and the rule first.
            message = str(exc).removeprefix(f"Error executing tool {name}: ")
            raise ToolError(message) from None


KNOWN_TOOLS: Final = frozenset(
    {"mem0_add", "mem0_search", "mem0_get_all", "mem0_status", "mem0_maintenance", "mem0_forget"}
)


def build_mcp(rt: ToolRuntime) -> MCPServer[Any]:
    mcp: MCPServer[Any] = EngramMCP(
        rt,
        "engram",
        title="Engram",
        instructions=INSTRUCTIONS,
        version=__version__,
    )
    register_tools(mcp, rt)
    return mcp
