"""The author corrects a book's memory: facts, entities and relations added, edited,
merged or rejected, on the Writing page and through ``/api/writing``.

The store keeps the record (versions, rejections, redirects: see
:mod:`storyloom.writing.book_store`); this module checks the request against the book
(a fact's subject is one of its resources, a relation's ends too), keeps the subject's
profile true to its corrected facts, and answers with the views the page shows. Each
correction is one transaction, and bumps the book's state version once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from storyloom.core.errors import NotFound
from storyloom.writing.book_store import (
    ENTITY_KIND_OF_FOLDER,
    ENTITY_KINDS,
    BookStore,
    Fact,
    FactVersion,
    Relation,
    Resource,
    ResourceNotFound,
)
from storyloom.writing.profiles import (
    PROFILE_TYPE_OF_KIND,
    profile_path,
    profile_resource,
    render_profile,
)
from storyloom.writing.uris import invalid, normalize_path, slug
from storyloom.writing.views import (
    EntityEdit,
    FactEdit,
    FactList,
    FactRef,
    FactVersionView,
    FactView,
    MergeBody,
    NewEntity,
    NewFact,
    NewRelation,
    RelationView,
)

FOLDER_OF_ENTITY_KIND = {kind: folder for folder, kind in ENTITY_KIND_OF_FOLDER.items()}


def fact_view(fact: Fact) -> FactView:
    return FactView(
        subject=fact.subject,
        attribute=fact.attribute,
        value=fact.value,
        chapter=fact.chapter,
        category=fact.category,
        source_uri=fact.source_uri,
        evidence=fact.evidence,
        output_id=fact.output_id,
        source=fact.source,
    )


def relation_view(relation: Relation) -> RelationView:
    return RelationView(
        from_=relation.from_path,
        to=relation.to_path,
        kind=relation.kind,
        reason=relation.reason,
        chapter=relation.chapter,
        source=relation.source,
    )


def _version_view(row: FactVersion) -> FactVersionView:
    return FactVersionView(
        subject=row.fact.subject,
        attribute=row.fact.attribute,
        chapter=row.fact.chapter,
        version=row.version,
        action=row.action,
        value=row.fact.value,
        category=row.fact.category,
        evidence=row.fact.evidence,
        source=row.fact.source,
        state_version=row.state_version,
        created_at=row.created_at,
    )


class MemoryCorrections:
    """The author's corrections of one data directory's books."""

    def __init__(self, store: BookStore) -> None:
        self.store = store

    # -- facts ---------------------------------------------------------------------------

    def fact_list(
        self, book_id: str, subject: str | None = None, before_chapter: int | None = None
    ) -> FactList:
        state = self.store.state_version(book_id)
        path = None if subject is None else normalize_path(subject)
        return FactList(
            state_version=state,
            facts=[
                fact_view(f)
                for f in self.store.facts(book_id, subject=path, before_chapter=before_chapter)
            ],
            rejected=[fact_view(f) for f in self.store.rejected_facts(book_id, subject=path)],
        )

    def fact_history(
        self, book_id: str, subject: str, attribute: str | None, chapter: int | None
    ) -> list[FactVersionView]:
        self.store.book(book_id)
        rows = self.store.fact_history(book_id, subject, attribute=attribute, chapter=chapter)
        return [_version_view(r) for r in rows]

    def add_fact(self, book_id: str, body: NewFact) -> FactList:
        subject = self._subject(book_id, body.subject)
        fact = Fact(
            subject, body.attribute, body.value, body.chapter, body.category, "", body.evidence
        )
        with self.store.database.write_transaction():
            self.store.add_author_fact(book_id, fact)
            self._refresh_profile(book_id, subject, body.chapter)
        return self.fact_list(book_id, subject)

    def edit_fact(self, book_id: str, body: FactEdit) -> FactList:
        subject = self._subject(book_id, body.subject)
        old = next(
            (
                f
                for f in self.store.facts(book_id, subject=subject)
                if (f.attribute, f.chapter) == (body.attribute.strip(), body.chapter)
            ),
            None,
        )
        if old is None:
            raise invalid(
                "attribute",
                f"{subject} has no fact {body.attribute.strip()!r} from chapter {body.chapter}",
            )
        edited = replace(
            old,
            attribute=body.new_attribute if body.new_attribute is not None else old.attribute,
            chapter=body.new_chapter if body.new_chapter is not None else old.chapter,
            value=body.value,
            category=body.category or old.category,
            evidence=body.evidence if body.evidence is not None else old.evidence,
        )
        with self.store.database.write_transaction():
            self.store.edit_fact(book_id, subject, old.attribute, old.chapter, edited)
            self._refresh_profile(book_id, subject, min(old.chapter, edited.chapter))
        return self.fact_list(book_id, subject)

    def reject_fact(self, book_id: str, body: FactRef) -> FactList:
        subject = normalize_path(body.subject)
        with self.store.database.write_transaction():
            self.store.reject_fact(book_id, subject, body.attribute, body.value, body.chapter)
            self._refresh_profile(book_id, subject, body.chapter)
        return self.fact_list(book_id, subject)

    def unreject_fact(self, book_id: str, body: FactRef) -> FactList:
        subject = normalize_path(body.subject)
        with self.store.database.write_transaction():
            self.store.unreject_fact(book_id, subject, body.attribute, body.value, body.chapter)
            self._refresh_profile(book_id, subject, body.chapter)
        return self.fact_list(book_id, subject)

    def _subject(self, book_id: str, path: str) -> str:
        """The resource a fact is about: it must be one of the book's."""
        subject = normalize_path(path)
        try:
            self.store.resource(book_id, subject)
        except ResourceNotFound as exc:
            raise invalid("subject", f"the book has no resource {subject!r}") from exc
        return subject

    def _refresh_profile(self, book_id: str, subject: str, from_chapter: int) -> None:
        """Render the subject's profile again from its corrected facts, at the chapter
        that changed and every later chapter it has a state for (curation renders it
        the same way), so Role A never gives a corrected fact's old value."""
        try:
            entity = self.store.resource(book_id, subject)
        except NotFound:
            return
        if entity.kind not in ENTITY_KINDS:
            return
        path = profile_path(entity)
        facts = self.store.facts(book_id, subject=subject)
        later = [c for c in self.store.level_chapters(book_id, path) if c > from_chapter]
        chapters = sorted({from_chapter, *later})
        writes = [
            w
            for chapter in chapters
            for w in render_profile(entity, facts, chapter, path=path).writes(chapter)
        ]
        resources: list[Resource] = []
        try:
            self.store.resource(book_id, path)
        except NotFound:
            folder = PROFILE_TYPE_OF_KIND.get(entity.kind, "world-state")
            resources.append(profile_resource(book_id, path, entity, folder))
        self.store.commit_chapter_memory(book_id, levels=writes, resources=resources)

    # -- entities ------------------------------------------------------------------------

    def add_entity(self, book_id: str, body: NewEntity) -> str:
        """A new character, place or plot thread, made by the author; returns its path."""
        folder = FOLDER_OF_ENTITY_KIND[body.kind]
        path = normalize_path(body.path or f"/entities/{folder}/{slug(body.title)}")
        if not path.startswith(f"/entities/{folder}/") or path.count("/") != 3:
            raise invalid("path", f"a {body.kind} lives at /entities/{folder}/<name>, not {path}")
        try:
            self.store.resource(book_id, path)
        except ResourceNotFound:
            pass
        else:
            raise invalid("path", f"the book already has {path}")
        self.store.put_resource(
            book_id,
            path,
            kind=body.kind,
            title=body.title.strip(),
            chapter_from=body.chapter_from,
            aliases=_names(body.aliases, body.title),
        )
        return path

    def edit_entity(self, book_id: str, body: EntityEdit) -> str:
        entity = self._entity(book_id, body.path, "path")
        title = body.title.strip() if body.title is not None else entity.title
        if not title:
            raise invalid("title", "an entity needs a name")
        aliases = body.aliases if body.aliases is not None else entity.aliases
        self.store.put_resource(
            book_id,
            entity.path,
            kind=entity.kind,
            title=title,
            ordinal=entity.ordinal,
            chapter_from=entity.chapter_from,
            aliases=_names(aliases, title),
            attrs=entity.attrs,
        )
        return entity.path

    def merge(self, book_id: str, body: MergeBody) -> str:
        source = self._entity(book_id, body.from_, "from")
        kept = self._entity(book_id, body.into, "into")
        with self.store.database.write_transaction():
            self.store.merge_entities(book_id, source.path, kept.path)
            moved = [f.chapter for f in self.store.facts(book_id, subject=kept.path)]
            self._refresh_profile(book_id, kept.path, min(moved, default=0))
        return kept.path

    def _entity(self, book_id: str, path: str, field: str) -> Resource:
        try:
            entity = self.store.resource(book_id, path)
        except ResourceNotFound as exc:
            raise invalid(field, f"the book has no entity {normalize_path(path)!r}") from exc
        if entity.kind not in ENTITY_KINDS:
            raise invalid(field, f"{entity.path} is a {entity.kind}, not an entity")
        return entity

    # -- relations -----------------------------------------------------------------------

    def add_relation(self, book_id: str, body: NewRelation) -> str:
        ends = [self._subject_of(book_id, p, f) for p, f in ((body.from_, "from"), (body.to, "to"))]
        self.store.link(book_id, ends[0], ends[1], body.kind, body.reason, body.chapter)
        return ends[0]

    def reject_relation(self, book_id: str, from_path: str, to_path: str, kind: str) -> str:
        self.store.reject_relation(book_id, from_path, to_path, kind)
        return normalize_path(from_path)

    def _subject_of(self, book_id: str, path: str, field: str) -> str:
        subject = normalize_path(path)
        try:
            self.store.resource(book_id, subject)
        except ResourceNotFound as exc:
            raise invalid(field, f"the book has no resource {subject!r}") from exc
        return subject


def _names(aliases: Sequence[str], title: str) -> list[str]:
    """The aliases as stored: stripped, no blanks or repeats, the title not among them."""
    return [a for a in dict.fromkeys(a.strip() for a in aliases) if a and a != title.strip()]
