"""Recording what a KB's vectors were built with in its own ``knowledge.json``
(``vector_index``: model, dimension, index type; seed 000 2.2 and 4.1).

Vectors live in the database, not in the KB folder; the record is what a person, or an
importer on another machine, reads to know which model the KB needs.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from storyloom.knowledge.knowledge_base import (
    KnowledgeBase,
    VectorIndexInfo,
    now_iso,
    save_knowledge_base,
)
from storyloom.knowledge.vector_index import current_vector_stats


def vector_index_info(conn: apsw.Connection, kb_id: str, model_id: str) -> VectorIndexInfo | None:
    """The record for the vectors of ``model_id`` stored now; None when there are none."""
    stats = current_vector_stats(conn, kb_id, model_id)
    if stats is None:
        return None
    dimension, count = stats
    return VectorIndexInfo(
        embedding_model_id=model_id,
        dimension=dimension,
        index_type="exact_cosine",
        vector_count=count,
        built_at=now_iso(),
    )


def record_vector_index(
    conn: apsw.Connection, kb: KnowledgeBase, folder: Path, model_id: str
) -> bool:
    """Write ``vector_index`` into the KB's file when it differs from what is recorded;
    True when the file was written. ``updated_at`` stays: the content did not change."""
    info = vector_index_info(conn, kb.kb_id, model_id)
    if info is None or info.same_index(kb.vector_index):
        return False
    updated = kb.model_copy(deep=True)
    updated.vector_index = info
    save_knowledge_base(updated, folder, touch=False)
    return True
