"""Moving a SillyTavern user folder in through ``/api/sillytavern``, and every chat going
on as it did there: the next prompt (sent to the scripted model) holds the locked
persona, the chat's and the global lore, the card's regex result and the preset."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from storyloom.store.database import DATABASE_FILE, Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.testing.st_documents import card_document, card_png
from storyloom.testing.st_user_folder import (
    BRAM_CHAT,
    CASS_CHAT,
    FACTS,
    MAIN_CHAT,
    append_message,
    write_st_user_folder,
)
from tests.server.conftest import LiveServer, chat_home

Json = dict[str, Any]
DEADLINE_S = 60


@pytest.fixture
def moved_in(
    tmp_path: Path, llm: ReplayLLMServer, start_server: Callable[..., LiveServer]
) -> Iterator[tuple[httpx.Client, Path, Path]]:
    """A server whose model is the scripted one, the SillyTavern folder next to it."""
    home = chat_home(tmp_path / "home", llm)
    root = tmp_path / "SillyTavern"
    user = write_st_user_folder(root, broken_card=True)
    live = start_server(home)
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client, root, user


def run_import(client: httpx.Client, path: Path) -> Json:
    started = client.post("/api/sillytavern/import", json={"path": str(path)})
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    deadline = time.monotonic() + DEADLINE_S
    while True:
        progress = client.get(f"/api/sillytavern/import/{job_id}").json()
        if progress["state"] != "running":
            break
        assert time.monotonic() < deadline, progress
        time.sleep(0.05)
    assert progress["state"] == "done", progress
    for kind in progress["kinds"]:  # every bar full at the end
        assert kind["done"] == kind["total"], kind
    report: Json = progress["report"]
    return report


def counts(report: Json) -> dict[str, tuple[int, int, int]]:
    return {c["kind"]: (c["added"], c["updated"], c["unchanged"]) for c in report["counts"]}


def conversation(client: httpx.Client, title: str) -> Json:
    listed = client.get("/api/chats").json()["conversations"]
    [found] = [c for c in listed if c["title"] == title]
    return found  # type: ignore[no-any-return]


def send(client: httpx.Client, llm: ReplayLLMServer, conversation_id: str, text: str) -> str:
    """Send ``text``; the prompt the model got, as one text."""
    llm.script(Reply(text="The gulls are quiet."))
    before = len(llm.chat_requests)
    version = client.get(f"/api/chats/{conversation_id}").json()["conversation"]["version"]
    sent = client.post(
        f"/api/chats/{conversation_id}/messages", json={"text": text, "expected_version": version}
    )
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + DEADLINE_S
    while (
        client.get(f"/api/chats/{conversation_id}").json()["running"]
        or len(llm.chat_requests) == before
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    request = llm.chat_requests[-1]
    return "\n".join(str(m.get("content")) for m in request["messages"])


def snapshot(home: Path) -> tuple[dict[str, int], dict[str, tuple[str, int]]]:
    """Row counts of every table, and the hash and mtime of every file of the data
    directory (the database aside)."""
    database = Database.in_home(home)  # the server's own driver: safe beside it
    try:
        db = database.connection()
        tables = [
            r[0]
            for r in db.execute(
                "select name from sqlite_master where type='table' "
                "and sql not like 'CREATE VIRTUAL%'"
            )
        ]
        rows = {t: _count(db, t) for t in tables}
    finally:
        database.close()
    files = {
        str(p.relative_to(home)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.name.startswith(DATABASE_FILE) and "logs" not in p.parts
    }
    return rows, files


def test_the_preview_counts_each_kind_and_names_a_broken_card(
    moved_in: tuple[httpx.Client, Path, Path],
) -> None:
    client, root, _ = moved_in
    answer = client.post("/api/sillytavern/preview", json={"path": str(root)})
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["layout"] == "root"
    found = {k["kind"]: (k["found"], k["new"]) for k in preview["kinds"]}
    assert found["characters"] == (3, 3) and found["worlds"] == (4, 4)
    assert found["chats"] == (5, 5) and found["personas"] == (2, 2)
    assert found["group_chats"] == (2, 2) and found["presets"] == (1, 1)
    assert found["quick_replies"] == (1, 1) and found["sprites"] == (2, 2)
    [problem] = preview["problems"]
    assert problem["file"] == "characters/Broken.json"


def test_a_path_that_is_no_sillytavern_folder_is_refused_by_name(
    moved_in: tuple[httpx.Client, Path, Path], tmp_path: Path
) -> None:
    client, _, _ = moved_in
    empty = tmp_path / "empty"
    empty.mkdir()
    answer = client.post("/api/sillytavern/preview", json={"path": str(empty)})
    assert answer.status_code == 422, answer.text
    assert str(empty) in answer.text
    assert client.get("/api/sillytavern/import/nope").status_code == 404


def test_an_imported_chat_goes_on_with_its_persona_lore_regex_and_preset(
    moved_in: tuple[httpx.Client, Path, Path], llm: ReplayLLMServer
) -> None:
    client, root, _ = moved_in
    report = run_import(client, root)
    assert counts(report)["characters"] == (3, 0, 0)
    assert counts(report)["worlds"] == (4, 0, 0)
    assert [p["file"] for p in report["problems"]] == ["characters/Broken.json"]
    assert counts(report)["regex"] == (2, 0, 0)
    # One book per world: the card's embedded copy is the world file's KB.
    names = [b["displayName"] for b in client.get("/api/knowledge/bases").json()["bases"]]
    assert names.count("Drifting Isles") == 1, names

    aria = conversation(client, MAIN_CHAT)
    prompt = send(
        client, llm, aria["id"], "Is the lantern lit at the lighthouse? And the tide, the market?"
    )
    assert FACTS["persona_default"] in prompt  # no lock: the default persona
    assert FACTS["lore_character"] in prompt  # the card's world
    assert FACTS["lore_chat"] in prompt  # the chat's own book
    assert FACTS["lore_global"] in prompt  # the global world list
    assert FACTS["regex_result"] in prompt  # the card's regex, allowed by the user
    assert FACTS["preset_main"] in prompt  # the active preset
    # The user's global regex scripts run too (this one only on what the model is sent).
    assert f"Until the {FACTS['global_regex_result']}." in prompt
    assert f"Until the {FACTS['global_regex_find']}." not in prompt

    bram = conversation(client, BRAM_CHAT)
    prompt = send(client, llm, bram["id"], "My leg aches.")
    assert FACTS["persona_locked"] in prompt  # the persona locked to this chat
    assert FACTS["lore_persona"] in prompt  # and the book bound to that persona
    assert FACTS["persona_default"] not in prompt

    # Cass's chat has no lock, but the sailor persona is connected to Cass.
    cass = conversation(client, CASS_CHAT)
    prompt = send(client, llm, cass["id"], "Evening.")
    assert FACTS["persona_locked"] in prompt
    assert FACTS["persona_default"] not in prompt


def test_quick_replies_backgrounds_sprites_and_themes_come_over(
    moved_in: tuple[httpx.Client, Path, Path], tmp_path: Path
) -> None:
    client, root, _ = moved_in
    report = run_import(client, root)
    assert counts(report)["quick_replies"] == (1, 0, 0)
    assert counts(report)["backgrounds"] == (2, 0, 0)
    assert counts(report)["sprites"] == (2, 0, 0)
    [shown] = client.get("/api/quick-replies").json()["sets"]
    assert shown["name"] == "Default" and shown["visible"] is True
    buttons = {b["label"]: b for b in shown["buttons"]}
    assert buttons["Wave"]["runnable"] is True
    assert buttons["Roll"]["runnable"] is False  # a slash command: kept, not runnable
    # A chat's own background, else the one SillyTavern showed everywhere.
    bram = client.get(f"/api/chats/{conversation(client, BRAM_CHAT)['id']}").json()
    assert bram["conversation"]["settings"]["background"] == "deck at night.png"
    aria = client.get(f"/api/chats/{conversation(client, MAIN_CHAT)['id']}").json()
    assert aria["conversation"]["settings"]["background"] == "harbor.png"
    assert client.get("/api/backgrounds/deck at night.png").status_code == 200
    [cass] = [c for c in client.get("/api/characters").json()["characters"] if c["name"] == "Cass"]
    sprites = client.get(f"/api/characters/{cass['id']}/expressions").json()
    assert sorted(s["label"] for s in sprites["expressions"]) == ["joy", "neutral"]
    # Themes are kept (for a move back out), and said to be inactive.
    assert (tmp_path / "home" / "sillytavern" / "themes" / "Dark Sea.json").is_file()
    assert any("theme" in i["what"] for i in report["inactive"])


def test_checkpoint_and_branch_join_their_chat_as_one_tree(
    moved_in: tuple[httpx.Client, Path, Path],
) -> None:
    client, root, _ = moved_in
    run_import(client, root)
    titles = [c["title"] for c in client.get("/api/chats").json()["conversations"]]
    assert not any(t.startswith(("Branch", "Checkpoint")) for t in titles), titles
    aria = conversation(client, MAIN_CHAT)
    nodes = client.get(f"/api/chats/{aria['id']}/tree").json()["nodes"]
    parents = {n["parent_id"] for n in nodes}
    leaves = [n for n in nodes if n["id"] not in parents]
    # Main path, branch, checkpoint, and two unchosen swipes.
    assert len(leaves) == 5
    group = conversation(client, "The Party")  # its branch too: one tree, two leaves
    nodes = client.get(f"/api/chats/{group['id']}/tree").json()["nodes"]
    parents = {n["parent_id"] for n in nodes}
    assert len([n for n in nodes if n["id"] not in parents]) == 2
    view = client.get(f"/api/chats/{aria['id']}").json()
    shown = [m["content"] for m in view["messages"]]
    assert shown[-1] == "Until the gulls go quiet."  # the main chat stays shown
    assert shown[2] == "Follow the lantern posts north."  # its chosen swipe
    hidden = [m for m in view["messages"] if m["content"] == "(out of character: brb)"]
    assert hidden and hidden[0]["extra"].get("hidden") is True


def test_a_second_import_changes_nothing_and_a_later_one_brings_the_new_message(
    moved_in: tuple[httpx.Client, Path, Path], tmp_path: Path
) -> None:
    client, root, user = moved_in
    run_import(client, root)
    home = tmp_path / "home"
    before = snapshot(home)
    assert before[0].get("chat_message", 0) > 0, before[0]
    again = run_import(client, root)
    assert all(added == 0 and updated == 0 for added, updated, _ in counts(again).values())
    after = snapshot(home)
    assert after[0] == before[0]
    assert {k: v for k, v in after[1].items() if before[1].get(k) != v} == {}

    append_message(user, f"chats/Aria/{MAIN_CHAT}.jsonl", "One more thing: the bell.")
    later = run_import(client, root)
    assert counts(later)["chats"][1] == 1
    aria = conversation(client, MAIN_CHAT)
    shown = [m["content"] for m in client.get(f"/api/chats/{aria['id']}").json()["messages"]]
    assert shown[-2:] == ["Until the gulls go quiet.", "One more thing: the bell."]
    assert len([c for c in client.get("/api/chats").json()["conversations"]]) == 4


def test_a_changed_card_is_a_new_version_and_lore_timers_carry_over(
    moved_in: tuple[httpx.Client, Path, Path],
) -> None:
    client, root, user = moved_in
    run_import(client, root)
    cass = client.get("/api/characters/Cass").json()
    (user / "characters" / "Cass.png").write_bytes(
        card_png(card_document("Cass", description="Cass now keeps bees."), chunks=("chara",))
    )
    report = run_import(client, root)
    assert counts(report)["characters"] == (0, 1, 2)
    listed = client.get("/api/characters").json()["characters"]
    assert sorted(c["name"] for c in listed) == ["Aria", "Bram", "Cass"]
    changed = client.get("/api/characters/Cass").json()
    assert changed["character"]["description"] == "Cass now keeps bees."
    assert changed["version"] != cass["version"]

    # chat_metadata.timedWorldInfo: the sticky lighthouse entry is still sticky here.
    aria = conversation(client, MAIN_CHAT)
    view = client.get(f"/api/chats/{aria['id']}").json()
    last = view["messages"][-1]["id"]
    state = client.get(f"/api/chats/{aria['id']}/messages/{last}/state").json()["state"]
    [(kb_id, effects)] = state["timed_effects"]["sticky"].items()
    assert kb_id.startswith("kb_") and next(iter(effects.values()))["end"] == 12
    assert state["variables"]["mood"] == "wary"


def test_a_character_imported_by_hand_before_is_not_duplicated(
    moved_in: tuple[httpx.Client, Path, Path],
) -> None:
    client, root, user = moved_in
    card = (user / "characters" / "Aria.png").read_bytes()
    by_hand = client.post("/api/chats/import", files={"file": ("Aria.png", card, "image/png")})
    assert by_hand.status_code == 201, by_hand.text
    report = run_import(client, root)
    assert counts(report)["characters"] == (2, 0, 1)
    listed = client.get("/api/characters").json()["characters"]
    assert sorted(c["name"] for c in listed) == ["Aria", "Bram", "Cass"]
    names = [b["displayName"] for b in client.get("/api/knowledge/bases").json()["bases"]]
    assert names.count("Drifting Isles") + names.count("Aria's Lorebook") == 1, names


def test_a_chat_imported_by_hand_before_is_not_duplicated(
    moved_in: tuple[httpx.Client, Path, Path],
) -> None:
    client, root, user = moved_in
    chat = (user / "chats" / "Bram" / f"{BRAM_CHAT}.jsonl").read_bytes()
    by_hand = client.post(
        "/api/chats/import", files={"file": ("bram.jsonl", chat, "application/jsonl")}
    )
    assert by_hand.status_code == 201, by_hand.text
    report = run_import(client, root)
    assert counts(report)["chats"] == (4, 0, 1)
    titles = [c["title"] for c in client.get("/api/chats").json()["conversations"]]
    assert titles.count(BRAM_CHAT) == 1 and len(titles) == 4, titles


def _count(db: Any, table: str) -> int:
    (count,) = db.execute(f'select count(*) from "{table}"').fetchall()[0]
    return int(count)


def test_a_chat_that_does_not_read_is_named_and_its_checkpoints_come_alone(
    moved_in: tuple[httpx.Client, Path, Path],
) -> None:
    client, root, user = moved_in
    main = user / f"chats/Aria/{MAIN_CHAT}.jsonl"
    main.write_text(main.read_text(encoding="utf-8") + '\n{"mes": ', encoding="utf-8")
    preview = client.post("/api/sillytavern/preview", json={"path": str(root)}).json()
    named = {p["file"] for p in preview["problems"]}
    assert named == {"characters/Broken.json", f"chats/Aria/{MAIN_CHAT}.jsonl"}
    report = run_import(client, root)  # every bar full although one chat did not read
    broken = [p for p in report["problems"] if p["file"] == f"chats/Aria/{MAIN_CHAT}.jsonl"]
    assert broken and broken[0]["field"].startswith("line ")
    assert counts(report)["chats"] == (4, 0, 0)
    # The branch and the checkpoint have no main chat here: each is a chat of its own.
    titles = [c["title"] for c in client.get("/api/chats").json()["conversations"]]
    assert titles.count(MAIN_CHAT) == 2, titles


def test_a_card_whose_regex_sillytavern_allowed_is_allowed_here(
    moved_in: tuple[httpx.Client, Path, Path],
) -> None:
    client, root, _ = moved_in
    run_import(client, root)
    by_name = {c["name"]: c["id"] for c in client.get("/api/characters").json()["characters"]}
    aria = client.get(f"/api/characters/{by_name['Aria']}").json()["scripts"]["permissions"]
    assert (aria["asked"], aria["regex_scripts"]) == (True, True)
    assert aria["frame_scripts"] is False  # SillyTavern was asked about regex only
    others = [n for n in by_name if n != "Aria"]
    for name in others:
        answer = client.get(f"/api/characters/{by_name[name]}").json()["scripts"]["permissions"]
        assert answer["regex_scripts"] is False, name
    chat = client.post("/api/chats", json={"character_id": by_name["Aria"]}).json()
    assert chat["settings"]["allow_regex_scripts"] is True
