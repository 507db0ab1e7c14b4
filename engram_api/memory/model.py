"""What a memory is: types, trust, sources, scopes, and the stored payload.

Payload flags that are filtered on (``archived``) are integers: qdrant-edge 0.9.0 turns a
boolean filter value into 0, so a filter on a bool field never matches.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from engram_api.embeddings.bm25 import TOKENIZER as SPARSE_TOKENIZER
from engram_contract.permissions import MemType, Trust
from engram_contract.scopes import SCOPE_RULE, is_scope, scope_kind

__all__ = ["MemType", "Memory", "Source", "Trust"]

SCHEMA_VERSION: Final = 1
WRITE_ID_NAMESPACE: Final = uuid.UUID("5b0c7f5e-2f7e-4d0a-9a57-0f3c1f6f6e1a")
_WS_RE: Final = re.compile(r"\s+")


class Source(StrEnum):
    user_direct = "user_direct"
    agent_output = "agent_output"
    tool_result = "tool_result"
    inferred = "inferred"


SEARCH_ONLY_RULE: Final = (
    "'all' and 'cross:<group-id>' are search-only scopes; write to a concrete scope"
)


def point_id(write_id: str) -> str:
    """A retried or replayed write lands on the same point."""
    return str(uuid.uuid5(WRITE_ID_NAMESPACE, write_id))


def content_point_id(scope: str, mem_type: str, chash: str) -> str:
    """Where a memory with this text lives in its scope and type.

    Concurrent identical adds (replicas sharing one Qdrant server included) all write this
    one point, so they store one memory without any lock: the exact-duplicate check before
    the write cannot see a write that is still in flight.
    """
    return str(uuid.uuid5(WRITE_ID_NAMESPACE, f"content:{scope}\x1f{mem_type}\x1f{chash}"))


def content_hash(content: str) -> str:
    """Exact-duplicate key: whitespace-normalised, case-preserving content."""
    normalised = _WS_RE.sub(" ", content.strip())
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


# U+0000 breaks C-string consumers downstream; a lone surrogate cannot be encoded as UTF-8.
BAD_TEXT_RULE: Final = (
    "must be valid Unicode text: it contains a lone surrogate (an unpaired \\ud800-\\udfff "
    "escape) or a NUL character"
)


def is_valid_text(text: str) -> bool:
    return "\x00" not in text and not any("\ud800" <= ch <= "\udfff" for ch in text)


def check_scope(value: str, field_name: str = "scope") -> str:
    from engram_api.errors import InvalidInput

    if value == "all" or value.startswith("cross:"):
        raise InvalidInput(field_name, SEARCH_ONLY_RULE)
    if not is_scope(value):
        raise InvalidInput(field_name, SCOPE_RULE)
    return value


@dataclass
class Memory:
    """One memory as the engine sees it (the store keeps it as a point payload)."""

    id: str
    content: str
    scope: str
    mem_type: MemType
    trust: Trust
    source: Source
    agent: str
    context: str
    created_at: datetime
    updated_at: datetime
    write_id: str
    embedding_model: str
    content_hash: str
    access_count: int = 0
    last_accessed_at: datetime | None = None
    archived: bool = False
    archived_reason: str = ""
    superseded_by: str = ""
    consolidated_from: list[str] = field(default_factory=list)
    consolidated_into: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_payload(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "scope": self.scope,
            "scope_kind": scope_kind(self.scope),
            "mem_type": self.mem_type.value,
            "trust": self.trust.value,
            "source": self.source.value,
            "agent": self.agent,
            "context": self.context,
            "created_at": rfc3339(self.created_at),
            "created_at_epoch": self.created_at.timestamp(),
            "updated_at": rfc3339(self.updated_at),
            "updated_at_epoch": self.updated_at.timestamp(),
            "access_count": self.access_count,
            "last_accessed_at": rfc3339(self.last_accessed_at) if self.last_accessed_at else "",
            "archived": 1 if self.archived else 0,
            "archived_reason": self.archived_reason,
            "superseded_by": self.superseded_by,
            "consolidated_from": list(self.consolidated_from),
            "consolidated_into": self.consolidated_into,
            "content_hash": self.content_hash,
            "write_id": self.write_id,
            "embedding_model": self.embedding_model,
            # Which tokenisation made the BM25 vector (CJK bigrams since bm25-en-cjk2).
            "sparse_tokenizer": SPARSE_TOKENIZER,
            "schema_version": self.schema_version,
        }

    @classmethod
    def from_payload(cls, id_: str, p: dict[str, Any]) -> Memory:
        def ts(key: str) -> datetime | None:
            raw = p.get(key) or ""
            return datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None

        created = ts("created_at") or utc_now()
        return cls(
            id=str(id_),
            content=str(p.get("content", "")),
            scope=str(p.get("scope", "")),
            mem_type=MemType(p.get("mem_type", "fact")),
            trust=Trust(p.get("trust", "medium")),
            source=Source(p.get("source", "agent_output")),
            agent=str(p.get("agent", "")),
            context=str(p.get("context", "")),
            created_at=created,
            updated_at=ts("updated_at") or created,
            write_id=str(p.get("write_id", "")),
            embedding_model=str(p.get("embedding_model", "")),
            content_hash=str(p.get("content_hash", "")),
            access_count=int(p.get("access_count", 0) or 0),
            last_accessed_at=ts("last_accessed_at"),
            archived=bool(p.get("archived", 0)),
            archived_reason=str(p.get("archived_reason", "")),
            superseded_by=str(p.get("superseded_by", "")),
            consolidated_from=[str(x) for x in p.get("consolidated_from") or []],
            consolidated_into=str(p.get("consolidated_into", "")),
            schema_version=int(p.get("schema_version", SCHEMA_VERSION)),
        )

    def to_public(self, *, score: float | None = None) -> dict[str, Any]:
        """The JSON shape tools and the CLI return."""
        out: dict[str, Any] = {
            "id": self.id,
            "content": self.content,
            "scope": self.scope,
            "mem_type": self.mem_type.value,
            "trust": self.trust.value,
            "source": self.source.value,
            "agent": self.agent,
            "context": self.context,
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
            "access_count": self.access_count,
            "archived": self.archived,
        }
        if self.last_accessed_at:
            out["last_accessed_at"] = rfc3339(self.last_accessed_at)
        if self.archived:
            out["archived_reason"] = self.archived_reason
        for key in ("superseded_by", "consolidated_into"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.consolidated_from:
            out["consolidated_from"] = list(self.consolidated_from)
        if score is not None:
            out["score"] = round(score, 6)
        return out
