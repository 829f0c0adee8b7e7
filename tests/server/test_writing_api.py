"""``/api/writing`` of a real server: books, import, the tree, resources as of a chapter,
the graph, search, context, its rebuild and its labels, warnings, plot threads, export and
bad input.

With no model at all the curation is the offline one (extractive summaries, the offline
prose reader), so these tests need no scripted replies; the one with a chat model only
scripts its answers.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.writing.book_store import BookStore, Fact
from storyloom.writing.manuscript_io import parse_manuscript

API = "/api/writing"
CURATION_DEADLINE_S = 60

MANUSCRIPT = """# The Salt Road

## Chapter 1: The Harbour

Mara walked the harbour wall at dawn. Her black hair was tied back against the wind.

## Chapter 2: The Lighthouse

The lighthouse keeper, Oren, counted the ships. Mara brought him bread.

## Chapter 3: The Storm

The storm broke over the salt road and the lamps went out one by one.
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def api(home: Path, start_server: Callable[..., Any]) -> Iterator[httpx.Client]:
    server = start_server(home)
    with httpx.Client(base_url=server.url + API, timeout=30) as client:
        yield client


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def new_book(api: httpx.Client, title: str = "The Salt Road") -> str:
    return str(ok(api.post("/books", json={"title": title}), 201)["id"])


def imported_book(api: httpx.Client) -> str:
    book_id = new_book(api)
    preview = ok(api.post("/import/preview", files={"file": ("salt.md", MANUSCRIPT.encode())}))
    chapters = [{"title": c["title"], "text": c["text"]} for c in preview["chapters"]]
    ok(api.post(f"/books/{book_id}/import", json={"chapters": chapters}))
    return book_id


def curated(api: httpx.Client, book_id: str, count: int) -> list[dict[str, Any]]:
    """The book's outputs once ``count`` of them have every step finished (or one failed).
    Without a model, summarize and extract finish as "skipped"."""
    deadline = time.monotonic() + CURATION_DEADLINE_S
    while True:
        outputs: list[dict[str, Any]] = ok(api.get(f"/books/{book_id}/outputs"))
        states = [set(o["steps"].values()) for o in outputs]
        assert not any("failed" in s for s in states), outputs
        if len(outputs) >= count and all(s <= {"done", "skipped"} for s in states):
            return outputs
        assert time.monotonic() < deadline, f"curation did not finish: {outputs}"
        time.sleep(0.05)


def store_of(home: Path) -> BookStore:
    return BookStore(Database.in_home(home))


def test_without_any_model_the_memory_steps_are_skipped_and_say_what_was_read_offline(
    api: httpx.Client,
) -> None:
    assert ok(api.get("/agent-model")) | {"ready": False, "source": "user"} == ok(
        api.get("/agent-model")
    )
    book_id = imported_book(api)
    output = curated(api, book_id, 3)[0]
    assert output["steps"] == {
        "summarize": "skipped",
        "extract": "skipped",
        "profiles": "done",
        "index": "done",
        "check": "done",
    }
    assert output["error"] is None
    for step in ("summarize", "extract"):
        reason = output["reasons"][step]
        assert reason.startswith("no model is set up (neither an agent model nor your chat model)")
    note = output["reasons"]["extract"]
    assert "offline prose reader" in note
    assert "not facts only implied" in note
    # The same reasons as terms, for the page to say in its language.
    assert output["reasonTerms"] == {
        "summarize": {"term": "summary_no_model", "problem": None},
        "extract": {"term": "facts_no_model", "problem": None},
    }


def test_with_only_a_chat_model_the_memory_steps_run_on_it(
    tmp_path: Path, start_server: Callable[..., Any]
) -> None:
    home = tmp_path / "chat-only"
    home.mkdir()
    with ReplayLLMServer(models=["chat-model"]) as llm:
        user = {"base_url": llm.url, "model": "chat-model", "max_retries": 0}
        (home / "settings.json").write_text(json.dumps({"user_llm": user}))
        live = start_server(home)
        with httpx.Client(base_url=live.url + API, timeout=30) as client:
            assert ok(client.get("/agent-model"))["source"] == "user"
            book_id = new_book(client)
            summary = {"l0": "Mara walks the wall.", "l1": "Mara walks the harbour wall."}
            facts = {
                "facts": [
                    {
                        "subject": "Mara",
                        "attribute": "hair",
                        "value": "black",
                        "category": "characterization",
                        "evidence": "Her black hair was tied back against the wind.",
                    }
                ],
                "entities": [{"path": "/entities/characters/mara", "title": "Mara"}],
            }
            llm.script(Reply(text=json.dumps(summary)), Reply(text=json.dumps(facts)))
            text = MANUSCRIPT.split("## Chapter 1: The Harbour\n")[1].split("## Chapter 2")[0]
            ok(
                client.post(
                    f"/books/{book_id}/import",
                    json={"chapters": [{"title": "The Harbour", "text": text}]},
                )
            )
            output = curated(client, book_id, 1)[0]
            path = {"path": "/manuscript/arc-01/chapter-001"}
            chapter = ok(client.get(f"/books/{book_id}/resource", params=path))
        assert set(output["steps"].values()) == {"done"}, output
        assert [r["model"] for r in llm.chat_requests] == ["chat-model", "chat-model"]
    assert chapter["levels"]["L0"]["text"] == "Mara walks the wall."


def test_a_book_is_created_listed_and_deleted(api: httpx.Client) -> None:
    created = ok(api.post("/books", json={"title": "Tidewater", "language": "en"}), 201)
    assert created["title"] == "Tidewater"
    assert (created["chapters"], created["words"]) == (0, 0)
    assert [b["id"] for b in ok(api.get("/books"))] == [created["id"]]
    assert api.delete(f"/books/{created['id']}").status_code == 204
    assert ok(api.get("/books")) == []
    assert api.get(f"/books/{created['id']}/tree").status_code == 404


def test_a_markdown_manuscript_is_previewed_then_imported_into_a_tree_with_word_counts(
    api: httpx.Client,
) -> None:
    preview = ok(api.post("/import/preview", files={"file": ("salt.md", MANUSCRIPT.encode())}))
    assert preview["format"] == "markdown"
    assert [c["title"] for c in preview["chapters"]] == [
        "Chapter 1: The Harbour",
        "Chapter 2: The Lighthouse",
        "Chapter 3: The Storm",
    ]
    book_id = new_book(api)
    chapters = [{"title": c["title"], "text": c["text"]} for c in preview["chapters"]]
    tree = ok(api.post(f"/books/{book_id}/import", json={"chapters": chapters}))["tree"]
    (arc,) = tree["manuscript"]
    assert [c["ordinal"] for c in arc["chapters"]] == [1, 2, 3]
    assert [c["words"] for c in arc["chapters"]] == [c["words"] for c in preview["chapters"]]
    assert arc["words"] == sum(c["words"] for c in preview["chapters"]) > 0
    assert "/meta/outline" in [r["path"] for r in tree["meta"]]
    summary = ok(api.get("/books"))[0]
    assert (summary["chapters"], summary["words"]) == (3, arc["words"])


def test_the_import_answer_names_the_curation_it_started_one_output_per_chapter_with_text(
    api: httpx.Client,
) -> None:
    book_id = new_book(api)
    chapters = [
        {"title": "The Harbour", "text": "Mara walked the harbour wall at dawn."},
        {"title": "An empty page", "text": "   "},
        {"title": "The Storm", "text": "The storm broke over the salt road."},
    ]
    imported = ok(api.post(f"/books/{book_id}/import", json={"chapters": chapters}))
    (arc,) = imported["tree"]["manuscript"]
    assert [c["ordinal"] for c in arc["chapters"]] == [1, 2, 3]
    started = imported["curation"]
    # A chapter without text has nothing to learn: no curation is started for it.
    assert [s["chapter"] for s in started] == [1, 3]
    assert all(s["outputId"].startswith("out_") for s in started)
    outputs = curated(api, book_id, 2)
    assert {(o["outputId"], o["chapter"]) for o in outputs} == {
        (s["outputId"], s["chapter"]) for s in started
    }


def test_an_unreadable_import_file_is_a_422_naming_it(api: httpx.Client) -> None:
    response = api.post("/import/preview", files={"file": ("empty.md", b"   ")})
    assert response.status_code == 422, response.text
    assert "empty.md" in response.json()["error"]["message"]


def test_a_resource_is_seen_as_it_stood_at_a_chapter(api: httpx.Client) -> None:
    book_id = imported_book(api)
    path = "/entities/characters/mara"
    edit = {"path": path, "kind": "character", "title": "Mara", "aliases": ["Mara"]}
    ok(api.put(f"/books/{book_id}/resource", json={**edit, "level": "L1", "text": "a sailor"}))
    later = {**edit, "level": "L1", "text": "a captain", "asOfChapter": 3}
    ok(api.put(f"/books/{book_id}/resource", json=later))

    def l1(as_of: int | None) -> str:
        params = {"path": path} | ({} if as_of is None else {"asOf": as_of})
        return str(ok(api.get(f"/books/{book_id}/resource", params=params))["levels"]["L1"]["text"])

    assert l1(2) == "a sailor"
    assert l1(3) == "a captain"
    assert l1(None) == "a captain"


def test_editing_a_level_makes_a_new_version_and_keeps_the_old(api: httpx.Client) -> None:
    book_id = new_book(api)
    body = {"path": "/meta/outline", "kind": "meta", "title": "Outline", "level": "L2"}
    first = ok(api.put(f"/books/{book_id}/resource", json={**body, "text": "Mara leaves."}))
    second = ok(api.put(f"/books/{book_id}/resource", json={**body, "text": "Mara returns."}))
    assert first["levels"]["L2"]["version"] == 1
    assert second["levels"]["L2"] == second["levels"]["L2"] | {"version": 2, "source": "author"}
    assert [(h["level"], h["version"]) for h in second["history"]] == [("L2", 1), ("L2", 2)]
    same = ok(api.put(f"/books/{book_id}/resource", json={**body, "text": "Mara returns."}))
    assert same["levels"]["L2"]["version"] == 2


def test_the_graph_shows_the_relations_known_at_a_chapter(api: httpx.Client, home: Path) -> None:
    book_id = imported_book(api)
    # The imported chapters' curation links chapters to the entities they name: let it
    # finish before the characters exist, so the only relation is the one made here.
    curated(api, book_id, 3)
    for slug, title in (("mara", "Mara"), ("oren", "Oren")):
        character = {"path": f"/entities/characters/{slug}", "kind": "character", "title": title}
        ok(api.put(f"/books/{book_id}/resource", json=character))
    mara, oren = "/entities/characters/mara", "/entities/characters/oren"
    store_of(home).link(book_id, mara, oren, "冲突", "bread debt", chapter=2)

    before = ok(api.get(f"/books/{book_id}/graph", params={"asOf": 1}))
    assert before["edges"] == []
    after = ok(api.get(f"/books/{book_id}/graph", params={"asOf": 2}))
    assert after["edges"] == [
        {
            "from": mara,
            "to": oren,
            "kind": "冲突",
            "reason": "bread debt",
            "chapter": 2,
            "source": "author",
        }
    ]
    assert {n["path"] for n in after["nodes"]} >= {mara, oren}


def test_search_finds_a_curated_chapter_under_the_manuscript(api: httpx.Client) -> None:
    book_id = imported_book(api)
    curated(api, book_id, 3)
    hits = ok(api.post(f"/books/{book_id}/search", json={"query": "lighthouse keeper"}))
    assert hits, "no hit"
    assert hits[0]["path"] == "/manuscript/arc-01/chapter-002"
    assert hits[0]["uri"].endswith(f"{book_id}/manuscript/arc-01/chapter-002")
    scoped = ok(
        api.post(f"/books/{book_id}/search", json={"query": "lighthouse", "under": "/meta"})
    )
    assert scoped == []


def test_the_context_of_a_chapter_is_rebuilt_byte_for_byte_from_its_sources(
    api: httpx.Client,
) -> None:
    book_id = imported_book(api)
    curated(api, book_id, 3)
    body = {"chapter": 4, "prompt": "Mara sails with Oren", "budgetTokens": 2000}
    context = ok(api.post(f"/books/{book_id}/context", json=body))
    assert context["pieces"] and context["tokens"] <= 2000
    assert context == ok(api.post(f"/books/{book_id}/context", json=body))
    sources = [
        {"uri": p["uri"], "level": p["level"], "version": p["version"]} for p in context["pieces"]
    ]
    rebuilt = ok(api.post(f"/books/{book_id}/context/rebuild", json={"sources": sources}))
    assert rebuilt["text"] == context["text"]
    assert all("chapter-004" not in p["path"] for p in context["pieces"])


def test_provenance_names_chapters_by_title_and_entities_by_name(api: httpx.Client) -> None:
    book_id = imported_book(api)
    curated(api, book_id, 3)
    mara = ok(
        api.post(f"/books/{book_id}/entities", json={"kind": "character", "title": "Mara"}), 201
    )
    body = {"chapter": 4, "prompt": "Mara sails with Oren", "budgetTokens": 2000}
    context = ok(api.post(f"/books/{book_id}/context", json=body))
    titles = {
        c["path"]: (c["ordinal"], c["title"])
        for arc in ok(api.get(f"/books/{book_id}/tree"))["manuscript"]
        for c in arc["chapters"]
    }
    chapters = [p for p in context["pieces"] if p["path"].split("#")[0] in titles]
    assert chapters
    for piece in chapters:
        label = piece["label"]
        assert label["uri"] == piece["uri"]
        assert (label["kind"], (label["chapter"], label["title"])) == (
            "chapter",
            titles[piece["path"].split("#")[0]],
        )
        assert label["passage"] == ("#p=" in piece["uri"])
    assert "Chapter 1: The Harbour" in {p["label"]["title"] for p in chapters}

    # A run's sources carry addresses only: the labels route names them, in order.
    harbour = next(p["uri"] for p in chapters if p["label"]["chapter"] == 1)
    gone = harbour.replace("chapter-001", "chapter-099")
    uris = [mara["uri"], f"{harbour.split('#')[0]}#p=0-20", gone]
    labels = ok(api.post(f"/books/{book_id}/context/labels", json={"uris": uris}))
    assert [(x["kind"], x["title"], x["chapter"], x["passage"]) for x in labels] == [
        ("character", "Mara", None, False),
        ("chapter", "Chapter 1: The Harbour", 1, True),
        (None, "/manuscript/arc-01/chapter-099", None, False),
    ]
    other = new_book(api, "Another")
    refused = api.post(f"/books/{other}/context/labels", json={"uris": [harbour]})
    assert refused.status_code == 422
    assert "uris[0]" in refused.text


def test_an_exported_epub_joins_soft_wrapped_lines_and_keeps_hard_breaks(
    api: httpx.Client,
) -> None:
    book_id = new_book(api)
    text = (
        "Mara walked the harbour wall\nat dawn, her hair\ntied back.\n\n"
        "The sign read:  \nNO BOATS\\\nAFTER DARK"
    )
    ok(api.post(f"/books/{book_id}/import", json={"chapters": [{"title": "Dawn", "text": text}]}))
    response = api.get(f"/books/{book_id}/export", params={"format": "epub"})
    assert response.status_code == 200, response.text
    with zipfile.ZipFile(io.BytesIO(response.content)) as epub:
        page = epub.read("EPUB/chapter-0001.xhtml").decode("utf-8")
    assert "<p>Mara walked the harbour wall at dawn, her hair tied back.</p>" in page
    assert "<p>The sign read:<br/>NO BOATS<br/>AFTER DARK</p>" in page


def test_a_rebuild_from_another_books_uri_is_refused(api: httpx.Client) -> None:
    book_id = new_book(api)
    other = "viking://resources/bk_other/meta/outline"
    response = api.post(f"/books/{book_id}/context/rebuild", json={"sources": [{"uri": other}]})
    assert response.status_code == 422, response.text


def test_a_contradiction_is_a_warning_the_author_can_mark_intentional(
    api: httpx.Client, home: Path
) -> None:
    book_id = new_book(api)
    mara = "/entities/characters/mara"
    character = {"path": mara, "kind": "character", "title": "Mara", "aliases": ["Mara"]}
    ok(api.put(f"/books/{book_id}/resource", json=character))
    store = store_of(home)
    store.add_facts(
        book_id,
        [
            Fact(mara, "hair", "black", 1, "characterization"),
            Fact(mara, "hair", "silver", 9, "characterization"),
        ],
    )
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "One"}), 201)
    text = "Mara stood at the rail. Mara's silver hair blew in the wind."
    ok(api.post(f"/books/{book_id}/chapters", json={"title": "Two", "text": text}), 201)
    curated(api, book_id, 1)
    warnings = ok(api.get(f"/books/{book_id}/warnings", params={"chapter": 2}))
    assert warnings, "no warning for silver hair against black"
    warning = warnings[0]
    assert (warning["subject"], warning["attribute"], warning["intentional"]) == (
        mara,
        "hair",
        False,
    )
    marked = ok(api.post(f"/warnings/{warning['id']}/intentional", json={"intentional": True}))
    assert marked["intentional"] is True
    again = ok(api.get(f"/books/{book_id}/warnings"))
    assert [w["intentional"] for w in again if w["id"] == warning["id"]] == [True]


def test_a_plot_thread_past_its_due_chapter_and_not_paid_off_is_overdue(
    api: httpx.Client,
) -> None:
    book_id = imported_book(api)
    threads = {
        "bread-debt": {"planted": 1, "due": 2},
        "the-lamp": {"planted": 1, "due": 2, "paidOff": 2},
        "the-map": {"planted": 2, "due": 5},
    }
    for slug, attrs in threads.items():
        body = {
            "path": f"/entities/plot-threads/{slug}",
            "kind": "plot-thread",
            "title": slug,
            "attrs": attrs,
        }
        ok(api.put(f"/books/{book_id}/resource", json=body))
    found = {t["title"]: t for t in ok(api.get(f"/books/{book_id}/threads"))}
    assert {k: t["overdue"] for k, t in found.items()} == {
        "bread-debt": True,
        "the-lamp": False,
        "the-map": False,
    }
    assert found["the-lamp"] | {"planted": 1, "due": 2, "paidOff": 2} == found["the-lamp"]


@pytest.mark.parametrize("fmt", ["markdown", "docx"])
def test_an_exported_book_reads_back_as_the_same_chapters(api: httpx.Client, fmt: str) -> None:
    book_id = imported_book(api)
    response = api.get(f"/books/{book_id}/export", params={"format": fmt})
    assert response.status_code == 200, response.text
    disposition = response.headers["content-disposition"]
    extension = {"markdown": ".md", "docx": ".docx"}[fmt]
    assert disposition.startswith("attachment;") and extension in disposition
    back = parse_manuscript(response.content, f"book{extension}")
    assert [c.title for c in back.chapters] == [
        "Chapter 1: The Harbour",
        "Chapter 2: The Lighthouse",
        "Chapter 3: The Storm",
    ]
    assert "lighthouse keeper" in back.chapters[1].text


def test_an_exported_epub_holds_every_chapter(api: httpx.Client) -> None:
    book_id = imported_book(api)
    response = api.get(f"/books/{book_id}/export", params={"format": "epub"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/epub+zip")
    with zipfile.ZipFile(io.BytesIO(response.content)) as epub:
        assert epub.read("mimetype") == b"application/epub+zip"
        pages = " ".join(
            epub.read(n).decode("utf-8") for n in epub.namelist() if n.endswith(".xhtml")
        )
    for words in ("harbour wall at dawn", "lighthouse keeper", "salt road"):
        assert words in pages


def test_the_chapter_workflow_is_written_into_the_project(api: httpx.Client, home: Path) -> None:
    book_id = new_book(api)
    workflow_id = ok(api.post(f"/books/{book_id}/chapter-workflow"))["workflowId"]
    listed = api.get(f"/../workflows/{workflow_id}")
    assert listed.status_code == 200, listed.text


@pytest.mark.parametrize(
    ("method", "url", "body", "status"),
    [
        ("GET", "/books/bk_missing/tree", None, 404),
        ("GET", "/books/bk_missing/resource?path=/meta/outline", None, 404),
        ("GET", "/books/{book}/resource?path=/meta/nothing", None, 404),
        ("GET", "/books/{book}/resource?path=/elsewhere/x", None, 422),
        ("GET", "/books/{book}/resource?path=/meta/../etc", None, 422),
        ("GET", "/books/{book}/resource?path=/meta/outline&asOf=-1", None, 422),
        ("PUT", "/books/{book}/chapters/9", {"text": "x"}, 404),
        ("PUT", "/books/{book}/chapters/0", {"text": "x"}, 422),
        ("POST", "/books", {"title": ""}, 422),
        ("POST", "/books/{book}/search", {"query": ""}, 422),
        ("POST", "/books/{book}/context", {"chapter": 0}, 422),
        ("POST", "/warnings/999999/intentional", {"intentional": True}, 404),
        ("POST", "/outputs/out_missing/retry", None, 404),
        ("GET", "/books/{book}/export?format=pdf", None, 422),
        ("PUT", "/books/{book}/resource", {"path": "/meta", "kind": "meta", "title": "x"}, 422),
        (
            "PUT",
            "/books/{book}/resource",
            {"path": "/manuscript/arc-01/chapter-009", "kind": "chapter", "title": "x"},
            422,
        ),
    ],
)
def test_bad_ids_and_paths_are_refused_with_404_or_422(
    api: httpx.Client, method: str, url: str, body: Any, status: int
) -> None:
    book_id = new_book(api)
    response = api.request(method, url.format(book=book_id), json=body)
    assert response.status_code == status, response.text
    assert json.loads(response.text)["error"]["message"]
