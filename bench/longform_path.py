"""The whole path a novelist takes: a prose manuscript imported through the Writing page's
routes on a live server, curated for real with no agent model, then probed.

Figures: curation seconds per chapter; for scene requests at target chapters, the share
of the scene's needed facts (their sentences, or their value in the subject's profile)
that storyloom's assembled context holds vs BM25 top-k over ~500-token chapter chunks at
the same token count (``ratio:``); recall of the newest state after legal changes;
facts from the target chapter or later found in a context (must be 0); Role C recall on
seeded contradictions by kind and false alarms on a clean chapter, through the chapter
save route (curation's check step) and the warnings route.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from bench import longform_prose as prose
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import longform_prose as prose

from storyloom.knowledge.hybrid_search import search_with_vector
from storyloom.knowledge.search_index import IndexedEntry, content_hash, sync_entries
from storyloom.server.app import create_app
from storyloom.store.database import Database
from storyloom.testing.loopback import serve_in_thread
from storyloom.writing.tokens import count_tokens

API = "/api/writing"
CURATION_DEADLINE_S = 3_600.0


def ok(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise RuntimeError(f"{response.request.method} {response.request.url}: {response.text}")
    return response.json() if response.content else None


def wait_curated(api: httpx.Client, book_id: str, count: int) -> None:
    deadline = time.monotonic() + CURATION_DEADLINE_S
    while True:
        outputs = ok(api.get(f"/books/{book_id}/outputs"))
        states = [set(o["steps"].values()) for o in outputs]
        if any("failed" in s for s in states):
            failed = [o for o in outputs if "failed" in o["steps"].values()]
            raise RuntimeError(f"curation failed: {failed[:2]}")
        if len(outputs) >= count and all(s <= {"done", "skipped"} for s in states):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("curation did not finish")
        time.sleep(0.2)


def chunk_index(db: Database, book: prose.ProseBook) -> dict[str, str]:
    kb = "bench-bm25-chunks"
    entries: list[IndexedEntry] = []
    for number, (_, text) in enumerate(book.chapters, start=1):
        chunk: list[str] = []
        paragraphs = text.split("\n\n")
        for i, paragraph in enumerate(paragraphs):
            chunk.append(paragraph)
            if count_tokens("\n\n".join(chunk)) >= 500 or i == len(paragraphs) - 1:
                body = "\n\n".join(chunk)
                entry = f"{number:05d}-{len(entries):06d}"
                entries.append(
                    IndexedEntry(
                        kb, entry, body, content_hash(body), "chunk", (), True, False, None
                    )
                )
                chunk = []
    sync_entries(db, kb, entries)
    return {e.entry_id: e.text for e in entries}


def bm25(db: Database, chunks: dict[str, str], probe: prose.Probe, tokens: int) -> str:
    hits = search_with_vector(
        db, probe.prompt, None, kb_ids=["bench-bm25-chunks"], model_id=None, top_k=500
    )
    out: list[str] = []
    used = 0
    for hit in hits:
        if int(hit.entry_id.split("-")[0]) >= probe.chapter:
            continue
        text = chunks[hit.entry_id] + "\n\n"
        cost = count_tokens(text)
        if used + cost > tokens:
            continue
        out.append(text)
        used += cost
    return "".join(out)


def held(text: str, pieces: list[dict[str, Any]], fact: Any, slug: str) -> bool:
    if fact.sentence in text:
        return True
    # a learned fact: its value in a profile or entity piece of the subject
    return any(
        slug.casefold() in p["uri"].casefold()
        and "#p=" not in p["uri"]
        and fact.value.casefold() in p["text"].casefold()
        for p in pieces
    )


def run(
    lang: str,
    chapters: int,
    characters: int,
    paragraphs: int,
    probe_count: int,
    budget: int,
    sentences: int = 4,
) -> None:
    book = prose.generate_prose_book(
        lang=lang,  # type: ignore[arg-type]
        chapters=chapters,
        characters=characters,
        paragraphs=paragraphs,
        sentences=sentences,
    )
    slugs = {c.name: c.slug for c in book.characters}
    print(
        f"\n(e) whole path, {lang}: {chapters} chapters,"
        f" {book.words():,} {'characters' if lang == 'zh' else 'words'},"
        f" {len(book.characters)} in the cast, {len(book.facts)} facts stated in prose"
    )
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        with (
            serve_in_thread(create_app(home, environ={}, local_models=False)) as base,
            httpx.Client(base_url=base + API, timeout=120) as api,
        ):
            book_id = ok(api.post("/books", json={"title": book.title}))["id"]
            preview = ok(
                api.post(
                    "/import/preview",
                    files={"file": ("manuscript.md", book.markdown().encode())},
                )
            )
            found = len(preview["chapters"])
            body = [{"title": c["title"], "text": c["text"]} for c in preview["chapters"]]
            start = time.perf_counter()
            ok(api.post(f"/books/{book_id}/import", json={"chapters": body}))
            wait_curated(api, book_id, found)
            curation_s = time.perf_counter() - start
            tree = ok(api.get(f"/books/{book_id}/tree"))
            entities = sum(
                1 for line in str(tree).split("'path': ") if line.startswith("'/entities/")
            )
            print(
                f"    import: {found} chapters found; curation {curation_s / found:.2f} s"
                f" per chapter ({curation_s:.0f} s); entity nodes in the tree: {entities}"
            )
            db = Database.in_home(home)
            chunks = chunk_index(db, book)
            ours = theirs = wanted = newest_ok = newest_n = future = 0
            ctx_ms: list[float] = []
            for probe in prose.probes(book, probe_count):
                t0 = time.perf_counter()
                ctx = ok(
                    api.post(
                        f"/books/{book_id}/context",
                        json={
                            "chapter": probe.chapter,
                            "prompt": probe.prompt,
                            "budgetTokens": budget,
                        },
                    )
                )
                ctx_ms.append((time.perf_counter() - t0) * 1000)
                flat = bm25(db, chunks, probe, int(ctx["tokens"]))
                for fact in book.needed(probe):
                    wanted += 1
                    got = held(ctx["text"], ctx["pieces"], fact, slugs[fact.subject])
                    ours += got
                    theirs += fact.sentence in flat
                    if fact.change:
                        newest_n += 1
                        newest_ok += got
                future += sum(f.sentence in ctx["text"] for f in book.future(probe.chapter))
            r_ours = ours / max(wanted, 1)
            r_bm25 = theirs / max(wanted, 1)
            ctx_ms.sort()
            print(
                f"    needed-fact recall at {budget:,} tokens over {probe_count} scenes:"
                f" storyloom {ours}/{wanted} = {r_ours:.1%},"
                f" BM25 top-k chunks {theirs}/{wanted} = {r_bm25:.1%}"
            )
            print(
                f"    newest state after legal changes: {newest_ok}/{newest_n};"
                f" facts from the target chapter or later in a context: {future} (target 0);"
                f" context route p50 {ctx_ms[len(ctx_ms) // 2]:.0f} ms"
            )
            role_c(api, book_id, book, found)
            print(f"ratio ({lang}): {r_ours / r_bm25 if r_bm25 else float('inf'):.2f}")


def role_c(api: httpx.Client, book_id: str, book: prose.ProseBook, chapters: int) -> None:
    """Three new chapters through the chapter routes: one in which a character loses an
    arm, one of seeded contradictions (that arm used among them), then a clean one that
    agrees with every fact and makes legal changes. What the warnings route reports."""
    stated, use = prose.lost_limb(book)
    filler = book.chapters[-1][1].split("\n\n")[0]
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "Mill", "text": f"{filler} {stated}"}))
    wait_curated(api, book_id, chapters + 1)
    target = chapters + 2
    seeded = [*prose.contradictions(book, target), use]
    ok(
        api.post(
            f"/books/{book_id}/chapters",
            json={"title": "Seeded", "text": "\n\n".join(c.sentence for c in seeded)},
        )
    )
    wait_curated(api, book_id, target)
    warnings = ok(api.get(f"/books/{book_id}/warnings", params={"chapter": target}))
    blob = [str(w) for w in warnings]
    caught: dict[str, list[int]] = {}
    for c in seeded:
        row = caught.setdefault(c.kind, [0, 0])
        row[1] += 1
        row[0] += any(c.subject in w and c.sentence[:40] in w for w in blob)
    clean = prose.consistent(book, target + 1)
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "Clean", "text": " ".join(clean)}))
    wait_curated(api, book_id, target + 1)
    alarms = ok(api.get(f"/books/{book_id}/warnings", params={"chapter": target + 1}))
    total = sum(v[1] for v in caught.values())
    hit = sum(v[0] for v in caught.values())
    kinds = ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(caught.items()))
    print(
        f"    Role C: seeded contradictions caught {hit}/{total} = {hit / max(total, 1):.0%}"
        f" ({kinds}); false alarms on a clean chapter of {len(clean)} sentences (facts"
        f" restated, the dead remembered, a move and a dye): {len(alarms)}"
        f" = {len(alarms) / max(len(clean), 1):.0%}"
    )
    for alarm in alarms[:3]:
        print(f"      false alarm: {alarm['detail'][:160]}")
