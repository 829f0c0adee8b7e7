"""The audit log of tool calls (seed 003 13): who called which tool with what, what the
policy and any person decided, and what came of it. Stored in the ``tool_call`` table;
browsable on the Tools page (``GET /api/tools/audit``) and written for every call the
ToolManager sees, denied and invalid ones included.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from storyloom.store.database import Database

RESULT_MAX_BYTES = 64 * 1024
"""A result longer than this (as JSON) is kept as the start of its JSON text."""


class AuditCaller(BaseModel):
    kind: str
    name: str


class AuditEntry(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    id: int
    at: str = Field(description="ISO 8601, UTC")
    caller: AuditCaller
    tool: str
    arguments: Any
    decision: str
    ok: bool
    result: Any = None
    error: str | None = None
    duration_ms: float = Field(alias="durationMs")
    run_id: str | None = Field(default=None, alias="runId")
    conversation_id: str | None = Field(default=None, alias="conversationId")


def _json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)


def _result_text(result: Any) -> str:
    text = _json(result)
    raw = text.encode("utf-8")
    if len(raw) <= RESULT_MAX_BYTES:
        return text
    head = raw[:RESULT_MAX_BYTES].decode("utf-8", errors="ignore")
    return _json(f"{head}… [truncated: the result was {len(raw)} bytes of JSON]")


class AuditLog:
    def __init__(self, database: Database) -> None:
        self.database = database

    def record(
        self,
        *,
        caller_kind: str,
        caller_name: str,
        tool: str,
        arguments: Any,
        decision: str,
        ok: bool,
        result: Any = None,
        error: str | None = None,
        duration_ms: float = 0.0,
        run_id: str | None = None,
        conversation_id: str | None = None,
    ) -> int:
        """Write one call; its row id."""
        with self.database.transaction() as conn:
            conn.execute(
                "INSERT INTO tool_call (at, caller_kind, caller_name, tool, arguments, "
                "decision, ok, result, error, duration_ms, run_id, conversation_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    time.time(),
                    caller_kind,
                    caller_name,
                    tool,
                    _json(arguments),
                    decision,
                    int(ok),
                    _result_text(result) if ok else None,
                    error,
                    float(duration_ms),
                    run_id,
                    conversation_id,
                ),
            )
            return int(conn.last_insert_rowid())

    def list(
        self, limit: int = 50, offset: int = 0, tool: str | None = None
    ) -> tuple[list[AuditEntry], int]:
        """Newest first; ``tool`` keeps one tool's calls. Also the count of all rows the
        filter keeps."""
        where, params = ("WHERE tool = ?", (tool,)) if tool else ("", ())
        conn = self.database.connection()
        total_row = conn.execute(f"SELECT COUNT(*) FROM tool_call {where}", params).fetchone()
        rows = conn.execute(
            "SELECT id, at, caller_kind, caller_name, tool, arguments, decision, ok, result, "
            f"error, duration_ms, run_id, conversation_id FROM tool_call {where} "
            "ORDER BY id DESC LIMIT ? OFFSET ?",
            (*params, max(0, limit), max(0, offset)),
        ).fetchall()
        return [_entry(row) for row in rows], int(total_row[0]) if total_row else 0

    def get(self, audit_id: int) -> AuditEntry | None:
        row = (
            self.database.connection()
            .execute(
                "SELECT id, at, caller_kind, caller_name, tool, arguments, decision, ok, "
                "result, error, duration_ms, run_id, conversation_id FROM tool_call "
                "WHERE id = ?",
                (audit_id,),
            )
            .fetchone()
        )
        return _entry(row) if row else None


def _entry(row: Any) -> AuditEntry:
    (id_, at, kind, name, tool, arguments, decision, ok, result, error, ms, run_id, conv) = row
    return AuditEntry(
        id=int(id_),
        at=datetime.fromtimestamp(float(at), tz=UTC).isoformat(timespec="milliseconds"),
        caller=AuditCaller(kind=str(kind), name=str(name)),
        tool=str(tool),
        arguments=json.loads(arguments),
        decision=str(decision),
        ok=bool(ok),
        result=json.loads(result) if result is not None else None,
        error=error,
        duration_ms=float(ms),
        run_id=run_id,
        conversation_id=conv,
    )
