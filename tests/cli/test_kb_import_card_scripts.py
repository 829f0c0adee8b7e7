"""``storyloom kb import`` of a card that carries scripts says what they are and that they
do not run until allowed; ``--allow-scripts`` allows them, and the server's new chats
with the character start with them on."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.chat.personalab.card_permissions import CardPermissionStore
from storyloom.project.project_file import init_project
from tests.cli.cli_support import storyloom
from tests.fixtures.script_cards import scripted_card

CARD = scripted_card()


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    init_project(project)
    card = tmp_path / "xiaosui.json"
    card.write_text(json.dumps(CARD, ensure_ascii=False), encoding="utf-8")
    return home, project, card


def test_an_imported_cards_scripts_are_listed_and_wait_for_the_flag(tmp_path: Path) -> None:
    home, project, card = _setup(tmp_path)
    done = storyloom("kb", "import", str(card), "--project", str(project), home=home)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "regex '状态栏' (on display, draws a page with scripts): not allowed yet" in out
    assert "Tavern Helper 'MVU': served by storyloom, never downloaded" in out
    assert "Tavern Helper '日替': not allowed yet" in out
    assert "--allow-scripts" in out
    character_id = json.loads(
        storyloom(
            "kb", "import", str(card), "--project", str(project), "--json", "--keep-both", home=home
        ).stdout
    )["character_file"]
    assert character_id  # a second character: the first one's answer is untouched
    assert CardPermissionStore(project).path.is_file() is False

    again = storyloom(
        "kb", "import", str(card), "--project", str(project), "--allow-scripts", home=home
    )
    assert again.returncode == 0, again.stderr
    assert "already in your library" in again.stdout
    assert "regex '状态栏' (on display, draws a page with scripts): runs" in again.stdout
    assert "Tavern Helper '日替': runs" in again.stdout
    assert "--allow-scripts" not in again.stdout
    answers = json.loads(CardPermissionStore(project).path.read_text(encoding="utf-8"))
    (answer,) = answers.values()
    assert answer["asked"] and answer["regex_scripts"] and answer["frame_scripts"]
    assert answer["helper_scripts"] == ["daily"]
    assert not answer["frame_writes"] and not answer["frame_network"]


def test_the_json_report_holds_the_scripts(tmp_path: Path) -> None:
    home, project, card = _setup(tmp_path)
    done = storyloom(
        "kb",
        "import",
        str(card),
        "--project",
        str(project),
        "--json",
        "--allow-scripts",
        home=home,
    )
    assert done.returncode == 0, done.stderr
    scripts = json.loads(done.stdout)["scripts"]
    assert scripts["needs_answer"] is False
    assert [(s["id"], s["status"]) for s in scripts["helper"]] == [
        ("mvu", "native"),
        ("daily", "runs"),
    ]
