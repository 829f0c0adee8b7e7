"""Every output a workflow node produced, kept in SQLite, and the pins that freeze a node.

A row is written when a node actually ran and completed (one transaction per node), never
for a node that failed or was cancelled, so a cancelled run leaves no half-written
history. Freezing pins one row: the runner then reports that row's outputs for the node
without running it or anything upstream of it. Restoring an older output is pinning its
row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_json, to_jsonable_python

from storyloom.core.errors import NotFound
from storyloom.store.database import Database


class HistoryEntry(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: int
    workflow_id: str = Field(alias="workflowId")
    node_id: str = Field(alias="nodeId")
    run_id: str = Field(alias="runId")
    created_at: str = Field(alias="createdAt", description="ISO 8601, UTC")
    outputs: dict[str, Any]
    preview: str
    frozen: bool = False


def jsonable_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Outputs as JSON values (pydantic models dumped, unknown objects as their ``str``)."""
    result: dict[str, Any] = to_jsonable_python(outputs, serialize_unknown=True)
    return result


def output_preview(jsonable: Mapping[str, Any]) -> str:
    """Seed 002's ``output`` text: a single string output as it is, else the outputs as
    (compact) JSON."""
    if len(jsonable) == 1:
        (value,) = jsonable.values()
        if isinstance(value, str):
            return value
    return to_json(jsonable).decode()


def _is_row_id(history_id: int) -> bool:
    """Whether SQLite could hold the id: a larger integer cannot even be bound to a query."""
    return -(2**63) <= history_id < 2**63


_COLUMNS = (
    "o.id, o.workflow_id, o.node_id, o.run_id, o.created_at, o.outputs, o.preview,"
    " p.history_id IS NOT NULL"
)
_FROM = (
    "FROM workflow_node_output o LEFT JOIN workflow_node_pin p"
    " ON p.workflow_id = o.workflow_id AND p.node_id = o.node_id AND p.history_id = o.id"
)


def _entry(row: tuple[Any, ...]) -> HistoryEntry:
    return HistoryEntry(
        id=row[0],
        workflow_id=row[1],
        node_id=row[2],
        run_id=row[3],
        created_at=row[4],
        outputs=json.loads(row[5]),
        preview=row[6],
        frozen=bool(row[7]),
    )


KEEP_PER_NODE = 100


class NodeHistory:
    """Each node's completed outputs, newest ``keep`` per node (a pinned one is always
    kept), and its pin."""

    def __init__(self, database: Database, *, keep: int = KEEP_PER_NODE) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.database = database
        self.keep = keep

    def record(
        self,
        workflow_id: str,
        node_id: str,
        run_id: str,
        cache_key: str,
        outputs: Mapping[str, Any],
        preview: str | None = None,
    ) -> int:
        """Keep one completed output; returns its history id. ``outputs`` are JSON values
        (what :func:`jsonable_outputs` gives); ``preview`` is worked out when not given."""
        jsonable = dict(outputs)
        created = datetime.now(UTC).isoformat(timespec="milliseconds")
        with self.database.transaction() as conn:
            conn.execute(
                "INSERT INTO workflow_node_output"
                " (workflow_id, node_id, run_id, cache_key, created_at, outputs, preview)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    workflow_id,
                    node_id,
                    run_id,
                    cache_key,
                    created,
                    json.dumps(jsonable, ensure_ascii=False),
                    output_preview(jsonable) if preview is None else preview,
                ),
            )
            history_id = int(conn.last_insert_rowid())
            # Older rows past the newest `keep` go, except the pinned one (deleting it
            # would drop the pin with it).
            conn.execute(
                "DELETE FROM workflow_node_output WHERE workflow_id = ?1 AND node_id = ?2"
                " AND id <= (SELECT id FROM workflow_node_output"
                "  WHERE workflow_id = ?1 AND node_id = ?2 ORDER BY id DESC LIMIT 1 OFFSET ?3)"
                " AND id NOT IN (SELECT history_id FROM workflow_node_pin"
                "  WHERE workflow_id = ?1 AND node_id = ?2)",
                (workflow_id, node_id, self.keep),
            )
            return history_id

    def entries(self, workflow_id: str, node_id: str, limit: int = 50) -> list[HistoryEntry]:
        """The node's outputs, newest first."""
        rows = self.database.connection().execute(
            f"SELECT {_COLUMNS} {_FROM} WHERE o.workflow_id = ? AND o.node_id = ?"
            " ORDER BY o.id DESC LIMIT ?",
            (workflow_id, node_id, limit),
        )
        return [_entry(row) for row in rows]

    def get(self, history_id: int) -> HistoryEntry | None:
        if not _is_row_id(history_id):
            return None
        row = (
            self.database.connection()
            .execute(f"SELECT {_COLUMNS} {_FROM} WHERE o.id = ?", (history_id,))
            .fetchone()
        )
        return _entry(row) if row else None

    def freeze(self, workflow_id: str, node_id: str, history_id: int) -> None:
        """Pin the node to one of its own history rows (replacing any earlier pin)."""
        with self.database.transaction() as conn:
            row = None
            if _is_row_id(history_id):
                row = conn.execute(
                    "SELECT workflow_id, node_id FROM workflow_node_output WHERE id = ?",
                    (history_id,),
                ).fetchone()
            if row is None or (row[0], row[1]) != (workflow_id, node_id):
                raise NotFound(
                    f"node {node_id!r} of workflow {workflow_id!r} has no history entry"
                    f" {history_id}"
                )
            conn.execute(
                "INSERT INTO workflow_node_pin (workflow_id, node_id, history_id)"
                " VALUES (?, ?, ?) ON CONFLICT (workflow_id, node_id)"
                " DO UPDATE SET history_id = excluded.history_id",
                (workflow_id, node_id, history_id),
            )

    def unfreeze(self, workflow_id: str, node_id: str) -> bool:
        """Remove the node's pin; False when it had none."""
        with self.database.transaction() as conn:
            conn.execute(
                "DELETE FROM workflow_node_pin WHERE workflow_id = ? AND node_id = ?",
                (workflow_id, node_id),
            )
            return bool(conn.changes())

    def frozen(self, workflow_id: str) -> dict[str, HistoryEntry]:
        """The workflow's pinned nodes with their pinned output."""
        rows = self.database.connection().execute(
            f"SELECT {_COLUMNS} FROM workflow_node_pin p JOIN workflow_node_output o"
            " ON o.id = p.history_id WHERE p.workflow_id = ?",
            (workflow_id,),
        )
        return {entry.node_id: entry for entry in map(_entry, rows)}
