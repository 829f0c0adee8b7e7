"""Schema migrations as code.

Each migration has a version, a name and the SQL that moves the schema one step, and
optionally Python code that runs before the SQL, for what SQL cannot say (dropping tables
whose names are stored in another table). They run in order inside one transaction each
and are recorded in ``schema_migrations``; a database newer than this code is refused
instead of being guessed at.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import apsw

from storyloom.core.errors import StoryloomError


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    before_sql: Callable[[apsw.Connection], None] | None = None


def _drop_vec_mirrors(conn: apsw.Connection) -> None:
    names = [str(row[0]) for row in conn.execute("SELECT table_name FROM kb_vec_table")]
    for name in names:
        # The names were made by storyloom (vec_<hex>_<dim>), never by a user.
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "meta",
        """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) STRICT;
        """,
    ),
    Migration(
        2,
        "knowledge_indexes",
        # Indexes derived from the knowledge.json files: rebuildable, never the source of
        # truth. The FTS table holds jieba-segmented text (see knowledge/text_index.py) and
        # is contentless, its rowid being kb_entry_index.id. Vectors live in kb_embedding;
        # per-model sqlite-vec tables (listed in kb_vec_table) mirrored them, keyed by
        # kb_embedding.id, created on demand because their dimension is per model (until
        # migration 7 dropped them).
        # kb_vector_generation counts changes to a KB's vectors, so in-memory copies can
        # tell cheaply whether they are current.
        """
        CREATE TABLE kb_entry_index (
            id                 INTEGER PRIMARY KEY,
            kb_id              TEXT NOT NULL,
            entry_id           TEXT NOT NULL,
            content_hash       TEXT NOT NULL,
            text               TEXT NOT NULL,
            entry_type         TEXT NOT NULL,
            tags               TEXT NOT NULL DEFAULT '[]',
            enabled            INTEGER NOT NULL DEFAULT 1,
            use_semantic       INTEGER NOT NULL DEFAULT 0,
            semantic_threshold REAL,
            UNIQUE (kb_id, entry_id)
        ) STRICT;
        CREATE VIRTUAL TABLE kb_entry_fts USING fts5(
            segmented,
            content='',
            contentless_delete=1,
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TABLE kb_embedding (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            kb_id        TEXT NOT NULL,
            entry_id     TEXT NOT NULL,
            model_id     TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            dim          INTEGER NOT NULL,
            vector       BLOB NOT NULL,
            UNIQUE (kb_id, entry_id, model_id)
        ) STRICT;
        CREATE INDEX kb_embedding_by_model ON kb_embedding (model_id, kb_id, dim);
        CREATE TABLE kb_vec_table (
            model_id   TEXT NOT NULL,
            dim        INTEGER NOT NULL,
            table_name TEXT NOT NULL UNIQUE,
            stale      INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (model_id, dim)
        ) STRICT;
        CREATE TABLE kb_vector_generation (
            kb_id      TEXT PRIMARY KEY,
            generation INTEGER NOT NULL
        ) STRICT;
        """,
    ),
    Migration(
        3,
        "workflow_node_history",
        # Every output a workflow node produced when it actually ran (outputs as JSON), and
        # the pins: a frozen node reports its pinned row instead of running. Pins are
        # removed with their row; rows are written one per node, after it completed.
        """
        CREATE TABLE workflow_node_output (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            workflow_id TEXT NOT NULL,
            node_id     TEXT NOT NULL,
            run_id      TEXT NOT NULL,
            cache_key   TEXT NOT NULL,
            created_at  TEXT NOT NULL,
            outputs     TEXT NOT NULL,
            preview     TEXT NOT NULL
        ) STRICT;
        CREATE INDEX workflow_node_output_by_node
            ON workflow_node_output (workflow_id, node_id, id);
        CREATE TABLE workflow_node_pin (
            workflow_id TEXT NOT NULL,
            node_id     TEXT NOT NULL,
            history_id  INTEGER NOT NULL
                REFERENCES workflow_node_output (id) ON DELETE CASCADE,
            PRIMARY KEY (workflow_id, node_id)
        ) STRICT;
        """,
    ),
    Migration(
        4,
        "chat",
        # Conversations as trees of messages (storyloom/chat/store/turn_tree.py). Every message
        # but a root has a parent in the same conversation; siblings are ordered by
        # sibling_index (0..n-1). active_child is the child a parent continues with, and
        # active_root the root a conversation starts from: the path root → pointer follows
        # them, and the messages below the pointer along them are the continuation that
        # time travel left. ladder lists the pointer's ancestors at depths 0, 64, 128...,
        # so a pointer move walks up only to where the new path meets the old one.
        # parent_id has no foreign key on purpose: a cascade down a 10,000-message chain
        # would exceed SQLite's trigger depth, so the tree code deletes subtrees itself.
        # chat_state holds the state after each message: a keyframe (the whole ChatState
        # JSON) or a delta (RFC 6902 ops from the parent's state), see
        # storyloom/chat/store/state_chain.py. JSON columns are TEXT.
        """
        CREATE TABLE chat_conversation (
            id          TEXT PRIMARY KEY,
            project_id  TEXT NOT NULL,
            title       TEXT NOT NULL,
            created_at  REAL NOT NULL,
            updated_at  REAL NOT NULL,
            pointer     TEXT,
            active_root TEXT,
            ladder      TEXT NOT NULL DEFAULT '[]',
            version     INTEGER NOT NULL DEFAULT 0,
            character   TEXT NOT NULL DEFAULT '{}',
            background  TEXT,
            settings    TEXT NOT NULL DEFAULT '{}',
            metadata    TEXT NOT NULL DEFAULT '{}'
        ) STRICT;
        CREATE INDEX chat_conversation_by_project
            ON chat_conversation (project_id, updated_at);
        CREATE TABLE chat_message (
            id              TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL
                REFERENCES chat_conversation (id) ON DELETE CASCADE,
            parent_id       TEXT,
            role            TEXT NOT NULL,
            name            TEXT NOT NULL DEFAULT '',
            content         TEXT NOT NULL,
            original        TEXT,
            thought         TEXT,
            status          TEXT NOT NULL,
            error           TEXT,
            sibling_index   INTEGER NOT NULL,
            depth           INTEGER NOT NULL,
            created_at      REAL NOT NULL,
            extra           TEXT NOT NULL DEFAULT '{}',
            active_child    TEXT
        ) STRICT;
        CREATE INDEX chat_message_by_parent
            ON chat_message (conversation_id, parent_id, sibling_index);
        CREATE INDEX chat_message_streaming
            ON chat_message (conversation_id) WHERE status = 'streaming';
        CREATE TABLE chat_state (
            message_id      TEXT PRIMARY KEY
                REFERENCES chat_message (id) ON DELETE CASCADE,
            conversation_id TEXT NOT NULL,
            kind            TEXT NOT NULL CHECK (kind IN ('keyframe', 'delta')),
            data            TEXT NOT NULL
        ) STRICT;
        """,
    ),
    Migration(
        5,
        "chat_summaries",
        # Plot-point summaries of conversations with their embeddings, for retrieval
        # scoped by conversation (storyloom/chat/personalab/summaries.py). source is the summary
        # preset the points belong to; embedding is a unit-length float32 blob made by
        # model (rows of another model are embedded again when searched). Rows go with
        # their conversation.
        """
        CREATE TABLE chat_summary (
            id              INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL
                REFERENCES chat_conversation (id) ON DELETE CASCADE,
            source          TEXT NOT NULL,
            idx             INTEGER NOT NULL,
            content         TEXT NOT NULL,
            model           TEXT NOT NULL,
            dim             INTEGER NOT NULL,
            embedding       BLOB NOT NULL,
            created_at      REAL NOT NULL,
            UNIQUE (conversation_id, source, idx)
        ) STRICT;
        """,
    ),
    Migration(
        6,
        "chat_turn_records",
        # What a reply was made from, kept beside the message rather than in its extra:
        # the prompt inspector's record (tens of kB a reply) and the model's raw text.
        # Reading a long chat never touches them; the inspector reads one row.
        """
        CREATE TABLE chat_turn_record (
            message_id      TEXT PRIMARY KEY
                REFERENCES chat_message (id) ON DELETE CASCADE,
            prompt          TEXT,
            raw             TEXT
        ) STRICT;
        """,
    ),
    Migration(
        7,
        "drop_sqlite_vec_mirrors",
        # Search reads vectors from kb_embedding into memory (knowledge/vector_index.py);
        # the vec0 mirrors were written on every store and never read. Dropping a vec0
        # table needs sqlite-vec loaded, which every storyloom connection has.
        "DROP TABLE kb_vec_table;",
        before_sql=_drop_vec_mirrors,
    ),
    Migration(
        8,
        "tool_call",
        # The audit log of tool calls (storyloom/tools/audit_log.py): one row per call,
        # whoever made it and whatever became of it (denied and invalid calls too).
        # arguments and result are JSON; result is cut to 64 KB. run_id and
        # conversation_id are the caller's, kept as text: the log outlives them.
        """
        CREATE TABLE tool_call (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            at              REAL NOT NULL,
            caller_kind     TEXT NOT NULL,
            caller_name     TEXT NOT NULL,
            tool            TEXT NOT NULL,
            arguments       TEXT NOT NULL,
            decision        TEXT NOT NULL,
            ok              INTEGER NOT NULL,
            result          TEXT,
            error           TEXT,
            duration_ms     REAL NOT NULL,
            run_id          TEXT,
            conversation_id TEXT
        ) STRICT;
        CREATE INDEX tool_call_by_tool ON tool_call (tool, id);
        """,
    ),
    Migration(
        9,
        "writing",
        # The long-form writing studio (storyloom/writing/). A book's resources are rows,
        # addressed by virtual paths (/meta, /entities, /manuscript, /summaries, /profiles).
        # Each resource's L0/L1/L2 texts are versioned rows; as_of_chapter says from which
        # chapter's end a text holds (0: from the start), so a chapter sees the book as it
        # stood before it. state_version counts the book's committed writes: context
        # assembly is a pure function of it. Facts and relations carry the chapter they
        # come from. writing_output keeps what the author curated; writing_curation_step
        # its background steps (resumable); writing_warning Role C's findings;
        # writing_suggestion Role B's proposals.
        """
        CREATE TABLE writing_book (
            id            TEXT PRIMARY KEY,
            project_id    TEXT NOT NULL,
            title         TEXT NOT NULL,
            language      TEXT NOT NULL DEFAULT 'en',
            created_at    TEXT NOT NULL,
            state_version INTEGER NOT NULL DEFAULT 0,
            settings      TEXT NOT NULL DEFAULT '{}'
        ) STRICT;
        CREATE TABLE writing_resource (
            book_id      TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            path         TEXT NOT NULL,
            kind         TEXT NOT NULL,
            title        TEXT NOT NULL,
            parent       TEXT NOT NULL,
            ordinal      INTEGER NOT NULL DEFAULT 0,
            chapter_from INTEGER NOT NULL DEFAULT 0,
            aliases      TEXT NOT NULL DEFAULT '[]',
            attrs        TEXT NOT NULL DEFAULT '{}',
            created_state INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (book_id, path)
        ) STRICT;
        CREATE INDEX writing_resource_by_parent ON writing_resource (book_id, parent, ordinal);
        CREATE INDEX writing_resource_by_kind ON writing_resource (book_id, kind, ordinal);
        CREATE TABLE writing_level (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            book_id       TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            path          TEXT NOT NULL,
            level         TEXT NOT NULL CHECK (level IN ('L0', 'L1', 'L2')),
            version       INTEGER NOT NULL,
            as_of_chapter INTEGER NOT NULL DEFAULT 0,
            text          TEXT NOT NULL,
            tokens        INTEGER NOT NULL,
            content_hash  TEXT NOT NULL,
            input_hash    TEXT,
            source        TEXT NOT NULL,
            state_version INTEGER NOT NULL,
            created_at    TEXT NOT NULL,
            UNIQUE (book_id, path, level, version)
        ) STRICT;
        CREATE INDEX writing_level_as_of ON writing_level (book_id, path, level, as_of_chapter);
        CREATE TABLE writing_fact (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            book_id    TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            subject    TEXT NOT NULL,
            attribute  TEXT NOT NULL,
            value      TEXT NOT NULL,
            chapter    INTEGER NOT NULL,
            category   TEXT NOT NULL,
            source_uri TEXT NOT NULL DEFAULT '',
            evidence   TEXT NOT NULL DEFAULT '',
            output_id  TEXT,
            UNIQUE (book_id, subject, attribute, chapter)
        ) STRICT;
        CREATE INDEX writing_fact_by_chapter ON writing_fact (book_id, chapter);
        CREATE TABLE writing_relation (
            id        INTEGER PRIMARY KEY AUTOINCREMENT,
            book_id   TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            from_path TEXT NOT NULL,
            to_path   TEXT NOT NULL,
            kind      TEXT NOT NULL,
            reason    TEXT NOT NULL DEFAULT '',
            chapter   INTEGER NOT NULL DEFAULT 0,
            created_state INTEGER NOT NULL DEFAULT 0,
            UNIQUE (book_id, from_path, to_path, kind)
        ) STRICT;
        -- A resource or relation is stamped with the state version its book had when it
        -- was made (every write raises the version first), so a reader pinned to an
        -- older version does not see it.
        CREATE TRIGGER writing_resource_created AFTER INSERT ON writing_resource BEGIN
            UPDATE writing_resource SET created_state =
                COALESCE((SELECT state_version FROM writing_book WHERE id = NEW.book_id), 0)
            WHERE book_id = NEW.book_id AND path = NEW.path;
        END;
        CREATE TRIGGER writing_relation_created AFTER INSERT ON writing_relation BEGIN
            UPDATE writing_relation SET created_state =
                COALESCE((SELECT state_version FROM writing_book WHERE id = NEW.book_id), 0)
            WHERE id = NEW.id;
        END;
        CREATE TABLE writing_output (
            id           TEXT PRIMARY KEY,
            book_id      TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            chapter      INTEGER NOT NULL,
            run_id       TEXT,
            node_id      TEXT,
            content_hash TEXT NOT NULL,
            text         TEXT NOT NULL,
            tags         TEXT NOT NULL DEFAULT '[]',
            persisted_at TEXT NOT NULL
        ) STRICT;
        CREATE INDEX writing_output_by_book ON writing_output (book_id, chapter);
        CREATE TABLE writing_curation_step (
            output_id  TEXT NOT NULL REFERENCES writing_output (id) ON DELETE CASCADE,
            step       TEXT NOT NULL,
            position   INTEGER NOT NULL,
            state      TEXT NOT NULL,
            attempts   INTEGER NOT NULL DEFAULT 0,
            error      TEXT,
            result     TEXT,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (output_id, step)
        ) STRICT;
        CREATE TABLE writing_warning (
            id           INTEGER PRIMARY KEY AUTOINCREMENT,
            book_id      TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            output_id    TEXT,
            chapter      INTEGER NOT NULL,
            dimension    TEXT NOT NULL,
            category     TEXT NOT NULL,
            subject      TEXT NOT NULL,
            attribute    TEXT NOT NULL,
            detail       TEXT NOT NULL,
            evidence_uri TEXT NOT NULL DEFAULT '',
            fingerprint  TEXT NOT NULL,
            intentional  INTEGER NOT NULL DEFAULT 0,
            created_at   TEXT NOT NULL,
            UNIQUE (book_id, fingerprint)
        ) STRICT;
        CREATE TABLE writing_suggestion (
            id          TEXT PRIMARY KEY,
            workflow_id TEXT NOT NULL,
            intent      TEXT NOT NULL,
            payload     TEXT NOT NULL,
            state       TEXT NOT NULL,
            reason      TEXT,
            created_at  TEXT NOT NULL
        ) STRICT;
        """,
    ),
    Migration(
        10,
        "writing_corrections",
        # The author corrects a book's memory. A fact says who made it (author, agent or
        # prose: the offline reader) and at which state version; every write of a fact is
        # kept in writing_fact_version, so an edit is a new version and the old stay
        # readable. A rejection keeps the whole rejected fact (un-rejecting restores it)
        # and is what later curation checks before inserting the same claim again.
        # A merge leaves a redirect: a later extraction naming the old path lands on the
        # kept one.
        """
        ALTER TABLE writing_fact ADD COLUMN source TEXT NOT NULL DEFAULT 'prose';
        ALTER TABLE writing_fact ADD COLUMN state_version INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE writing_relation ADD COLUMN source TEXT NOT NULL DEFAULT 'prose';
        CREATE INDEX writing_fact_by_subject ON writing_fact (book_id, subject, attribute);
        CREATE TABLE writing_fact_version (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            book_id       TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            subject       TEXT NOT NULL,
            attribute     TEXT NOT NULL,
            chapter       INTEGER NOT NULL,
            version       INTEGER NOT NULL,
            action        TEXT NOT NULL,
            value         TEXT NOT NULL,
            category      TEXT NOT NULL,
            source_uri    TEXT NOT NULL DEFAULT '',
            evidence      TEXT NOT NULL DEFAULT '',
            output_id     TEXT,
            source        TEXT NOT NULL,
            state_version INTEGER NOT NULL,
            created_at    TEXT NOT NULL,
            UNIQUE (book_id, subject, attribute, chapter, version)
        ) STRICT;
        CREATE TABLE writing_fact_rejection (
            book_id       TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            subject       TEXT NOT NULL,
            attribute     TEXT NOT NULL,
            value         TEXT NOT NULL,
            chapter       INTEGER NOT NULL,
            category      TEXT NOT NULL,
            source_uri    TEXT NOT NULL DEFAULT '',
            evidence      TEXT NOT NULL DEFAULT '',
            output_id     TEXT,
            source        TEXT NOT NULL,
            state_version INTEGER NOT NULL,
            created_at    TEXT NOT NULL,
            PRIMARY KEY (book_id, subject, attribute, value, chapter)
        ) STRICT;
        CREATE TABLE writing_relation_rejection (
            book_id       TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            from_path     TEXT NOT NULL,
            to_path       TEXT NOT NULL,
            kind          TEXT NOT NULL,
            state_version INTEGER NOT NULL,
            created_at    TEXT NOT NULL,
            PRIMARY KEY (book_id, from_path, to_path, kind)
        ) STRICT;
        CREATE TABLE writing_redirect (
            book_id       TEXT NOT NULL REFERENCES writing_book (id) ON DELETE CASCADE,
            from_path     TEXT NOT NULL,
            to_path       TEXT NOT NULL,
            state_version INTEGER NOT NULL,
            PRIMARY KEY (book_id, from_path)
        ) STRICT;
        INSERT INTO writing_fact_version (book_id, subject, attribute, chapter, version, action,
            value, category, source_uri, evidence, output_id, source, state_version, created_at)
        SELECT book_id, subject, attribute, chapter, 1, 'set', value, category, source_uri,
            evidence, output_id, source, 0, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
        FROM writing_fact;
        """,
    ),
    Migration(
        11,
        "writing warnings name the fact and both sentences",
        # A warning shows what the book established (value, chapter, the sentence that
        # said so) beside what the checked text says (value, sentence).
        """
        ALTER TABLE writing_warning ADD COLUMN expected TEXT NOT NULL DEFAULT '';
        ALTER TABLE writing_warning ADD COLUMN found TEXT NOT NULL DEFAULT '';
        ALTER TABLE writing_warning ADD COLUMN since_chapter INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE writing_warning ADD COLUMN evidence TEXT NOT NULL DEFAULT '';
        ALTER TABLE writing_warning ADD COLUMN fact_evidence TEXT NOT NULL DEFAULT '';
        """,
    ),
    Migration(
        12,
        "writing warnings keep their frame as values",
        # The Writing page says a warning in its own language: which frame (another
        # value, a lost body part used, the dead acting), the subject's name, and what
        # the attribute was before a progression; ``detail`` stays the English words.
        # A warning kept before has kind '' (the page shows its detail).
        """
        ALTER TABLE writing_warning ADD COLUMN kind TEXT NOT NULL DEFAULT '';
        ALTER TABLE writing_warning ADD COLUMN subject_name TEXT NOT NULL DEFAULT '';
        ALTER TABLE writing_warning ADD COLUMN earlier_value TEXT;
        ALTER TABLE writing_warning ADD COLUMN earlier_until INTEGER;
        """,
    ),
)


class SchemaTooNewError(StoryloomError):
    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the database schema is version {found}, newer than this storyloom knows "
            f"({known}); upgrade storyloom or use another --home"
        )


def current_version(conn: apsw.Connection) -> int:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'"
    ).fetchone()
    if not has_table:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: apsw.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Bring the schema up to date; return the versions applied now."""
    known = max((m.version for m in migrations), default=0)
    with conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL) STRICT"
        )
    found = current_version(conn)
    if found > known:
        raise SchemaTooNewError(found, known)
    applied = []
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version <= found:
            continue
        # apsw's connection context manager is a savepoint: the step and its record
        # commit together or not at all.
        with conn:
            if migration.before_sql is not None:
                migration.before_sql(conn)
            conn.execute(migration.sql)
            conn.execute(
                "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
        applied.append(migration.version)
    return applied
