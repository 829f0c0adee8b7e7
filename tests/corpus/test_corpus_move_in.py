"""``storyloom import-sillytavern`` and ``export-sillytavern`` on a user folder laid out
from the corpus' real files, as SillyTavern keeps them (``characters/``, ``worlds/``,
``chats/<avatar name>/``): what came, one book per world, a second run that changes
nothing, and a move back out that comes in again the same."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.personalab.library import PresetLibrary
from storyloom.chat.store.turn_tree import TurnTree
from storyloom.cli.context import project_or_default
from storyloom.knowledge.global_library import GLOBAL_DIR
from storyloom.project.project_knowledge import open_project_knowledge
from storyloom.store.database import Database

# corpus file -> where SillyTavern keeps it in a user folder
LAYOUT = {
    "st-default_Seraphina_card_v1.18.0_v2+v3.png": "characters/default_Seraphina.png",
    "zh_card_kori_v2+v3_aichared.png": "characters/科里.png",
    "de_card_PeerDerPersonaler_v2only_tiny.png": "characters/Peer der Personaler.png",
    "zh_card_ai_v3json_mvu_27entries.json": "characters/爱.json",
    "st-default_Eldoria_worldinfo_v1.18.0.json": "worlds/Eldoria.json",
    "zh_worldinfo_chujuyiqinzhi_19entries.json": "worlds/楚橘亦秦枳.json",
    "worldinfo_EU4_imported_with_originalData_20entries.json": "worlds/EU4.json",
    "chat_legacy_header_Seraphina_2024.jsonl": (
        "chats/default_Seraphina/Seraphina - 2024-09-19@20h03m29s.jsonl"
    ),
}

Json = dict[str, Any]


def storyloom(*args: str, home: Path) -> Json:
    done = subprocess.run(
        [sys.executable, "-m", "storyloom", *args, "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    answer: Json = json.loads(done.stdout)
    return answer


def added(report: Json) -> dict[str, int]:
    return {c["kind"]: c["added"] for c in report["counts"] if c["added"]}


@pytest.fixture
def user_folder(tmp_path: Path, corpus_sample: Callable[[str], Path]) -> Path:
    user = tmp_path / "SillyTavern" / "data" / "default-user"
    for name, place in LAYOUT.items():
        target = user / place
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus_sample(name), target)
    return user


def _characters(home: Path) -> dict[str, list[str]]:
    """Character name -> its bound KB ids, in the home's default project."""
    library = PresetLibrary(project_or_default(None, home))
    return {
        c.name: library.character(c.id).knowledge_bases
        for c in library.characters()
        if c.error is None
    }


def _books(home: Path) -> list[tuple[str, str]]:
    """(display name, kb_id) of every KB the default project sees."""
    knowledge = open_project_knowledge(project_or_default(None, home), [home / GLOBAL_DIR])
    return sorted((b.kb.kb_displayName, b.kb.kb_id) for b in knowledge.catalog.bases)


def _messages(home: Path) -> list[list[str]]:
    database = Database.in_home(home)
    try:
        tree = TurnTree(database)
        texts = []
        for summary in tree.conversations():
            conversation = tree.conversation(summary.id)
            texts.append([m.content for m in tree.path(conversation.pointer)])
        return sorted(texts)
    finally:
        database.close()


def test_a_folder_of_real_files_moves_in_once_and_back_out(
    user_folder: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    report = storyloom("import-sillytavern", str(user_folder.parents[1]), home=home)
    assert report["problems"] == []
    assert added(report) == {"characters": 4, "worlds": 3, "chats": 1}

    # Seraphina's card carries SillyTavern's Eldoria book: it is the world file's KB.
    eldoria = [kb_id for name, kb_id in _books(home) if name == "Eldoria"]
    assert len(eldoria) == 1, _books(home)
    assert eldoria[0] in _characters(home)["Seraphina"]
    [chat] = _messages(home)
    assert chat[0].startswith("*You wake with a start")

    again = storyloom("import-sillytavern", str(user_folder), home=home)
    assert added(again) == {}
    assert all(c["updated"] == 0 for c in again["counts"]), again["counts"]

    out = tmp_path / "moved-out"
    storyloom("export-sillytavern", str(out), home=home)
    back = tmp_path / "home-back"
    report = storyloom("import-sillytavern", str(out), home=back)
    assert report["problems"] == []
    assert added(report)["characters"] == 4 and added(report)["chats"] == 1
    assert sorted(_characters(back)) == sorted(_characters(home))
    assert _messages(back) == _messages(home)
