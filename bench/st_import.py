"""Moving a SillyTavern user in: a generated user folder at a heavy user's size.

The folder (``data/<user>/`` as SillyTavern 1.18 writes it) holds ``--characters`` PNG cards,
``--chats`` chats of ``--messages`` messages spread over them (each reply with swipes), and
``--books`` world books, a tenth of them also embedded in a card, plus a settings.json with
personas and the global book list.

(a) storyloom: ``storyloom import-sillytavern DIR`` as a user runs it, in its own process:
    wall time and that process's peak memory (target: under 2 minutes at full size);
    then a second run, which must change nothing.
(b) the baseline: the same files one by one through the importers storyloom had before,
    in this process, as ``storyloom kb import`` (cards, books) and ``storyloom chat import``
    (chats) do for each file, into a fresh data directory. It skips the per-file process
    start a user running those commands pays, so it flatters the baseline.

Ends with ``ratio: <baseline_s / storyloom_s>``.

    .venv/bin/python bench/st_import.py [--characters 500] [--chats 5000] [--messages 200]
        [--books 50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from storyloom.testing.st_documents import (  # noqa: E402
    card_book_entry,
    card_document,
    card_png,
    chat_jsonl,
    chat_message,
    world_info_document,
    world_info_entry,
)

WORDS = tuple(
    [
        "lantern",
        "harbour",
        "tide",
        "salt",
        "rope",
        "storm",
        "map",
        "compass",
        "island",
        "market",
        "spice",
        "silver",
        "bell",
        "gate",
        "tower",
        "road",
        "river",
        "forest",
        "ember",
        "ash",
        "crown",
        "letter",
        "oath",
        "debt",
        "ship",
        "sail",
        "anchor",
        "moon",
        "cliff",
    ]
)


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _book_entries(rng: random.Random, book: int, count: int) -> list[tuple[list[str], str]]:
    return [([f"key{book}x{i}", rng.choice(WORDS)], _sentence(rng, 30)) for i in range(count)]


def write_folder(
    root: Path, *, characters: int, chats: int, messages: int, books: int, seed: int = 7
) -> dict[str, int]:
    """Write a SillyTavern user folder under ``root``; returns what it holds."""
    rng = random.Random(seed)
    for name in ("characters", "chats", "worlds", "User Avatars", "groups", "group chats"):
        (root / name).mkdir(parents=True, exist_ok=True)
    book_entries = [_book_entries(rng, b, 20) for b in range(books)]
    for b, entries in enumerate(book_entries):
        document = world_info_document(
            [world_info_entry(i, keys, text) for i, (keys, text) in enumerate(entries)]
        )
        (root / "worlds" / f"Book {b}.json").write_text(json.dumps(document), encoding="utf-8")
    names = [f"Char{c:04d}" for c in range(characters)]
    for c, name in enumerate(names):
        fields: dict[str, Any] = {
            "description": _sentence(rng, 60),
            "personality": _sentence(rng, 8),
            "scenario": _sentence(rng, 20),
        }
        book = None
        if books and c % 10 == 0:
            b = c % books
            fields["extensions"] = {"world": f"Book {b}", "talkativeness": "0.5", "fav": False}
            book = [
                card_book_entry(i, keys, text) for i, (keys, text) in enumerate(book_entries[b])
            ]
        card = card_document(
            name, book=book, book_name=f"Book {c % books}" if book else None, **fields
        )
        (root / "characters" / f"{name}.png").write_bytes(card_png(card))
    for n in range(chats):
        name = names[n % characters]
        folder = root / "chats" / name
        folder.mkdir(exist_ok=True)
        lines = []
        for m in range(messages):
            if m % 2 == 0:
                lines.append(chat_message("User", _sentence(rng, 25), is_user=True))
            else:
                reply = _sentence(rng, 60)
                swipes = [reply, _sentence(rng, 60)] if m % 10 == 1 else [reply]
                lines.append(chat_message(name, reply, swipes=swipes, swipe_id=0))
        stamp = (
            f"2025-{1 + n % 12:02d}-{1 + n % 28:02d}@{n % 24:02d}h{n % 60:02d}m{n // 60 % 60:02d}s"
        )
        header = {
            "user_name": "User",
            "character_name": name,
            "create_date": stamp,
            "chat_metadata": {"note_prompt": "", "note_interval": 1},
        }
        (folder / f"{name} - {stamp}.jsonl").write_text(
            chat_jsonl(lines, character_name=name, header=header), encoding="utf-8"
        )
    settings = {
        "power_user": {
            "personas": {"user-default.png": "Wren"},
            "persona_descriptions": {
                "user-default.png": {"description": "Wren, a courier.", "position": 0}
            },
            "default_persona": "user-default.png",
        },
        "world_info_settings": {"world_info": {"globalSelect": ["Book 0"] if books else []}},
    }
    (root / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    return {"characters": characters, "chats": chats, "messages": chats * messages, "books": books}


def run_storyloom(folder: Path, home: Path) -> tuple[float, float, dict[str, Any]]:
    """``storyloom import-sillytavern`` in its own process: seconds, peak MiB, report."""
    command = [
        sys.executable, "-m", "storyloom", "import-sillytavern", str(folder),
        "--home", str(home), "--json",
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode != 0:
        raise SystemExit(f"import-sillytavern failed ({done.returncode}):\n{done.stderr[-3000:]}")
    # ru_maxrss of children is the largest child so far: the import is the largest here.
    return seconds, max(peak, before) / 1024, json.loads(done.stdout)


def run_baseline(folder: Path, home: Path) -> float:
    """Each file through the importers ``kb import`` and ``chat import`` call."""
    from storyloom.chat.store.st_chat import import_st_chat
    from storyloom.chat.store.turn_tree import TurnTree
    from storyloom.cli.context import project_id, project_or_default
    from storyloom.core.home import ensure_home
    from storyloom.knowledge.global_library import GLOBAL_DIR
    from storyloom.project.knowledge_import import import_knowledge_file
    from storyloom.sillytavern.chat_log import parse_chat_jsonl
    from storyloom.store.database import Database

    start = time.perf_counter()
    data_dir = ensure_home(home)
    project = project_or_default(None, data_dir)
    database = Database.in_home(data_dir)
    tree = TurnTree(database)
    pid = project_id(project)
    try:
        for path in [*sorted((folder / "worlds").glob("*.json")),
                     *sorted((folder / "characters").glob("*.png"))]:  # fmt: skip
            import_knowledge_file(
                path,
                project_dir=project,
                global_folder=data_dir / GLOBAL_DIR,
                database=database,
                available_model_ids=[],
                display_name=None,
                chat_importer=None,
                existing=[],
                on_duplicate="keep_both",
            )
        for path in sorted((folder / "chats").glob("*/*.jsonl")):
            chat = parse_chat_jsonl(path.read_text(encoding="utf-8"), path)
            import_st_chat(tree, chat, project_id=pid, title=path.stem)
    finally:
        database.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--characters", type=int, default=500)
    parser.add_argument("--chats", type=int, default=5000)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--books", type=int, default=50)
    parser.add_argument("--keep", type=Path, help="Write the folder here and keep it")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="st-import-bench-"))
    folder = args.keep or work / "data" / "default-user"
    try:
        start = time.perf_counter()
        held = write_folder(
            folder,
            characters=args.characters,
            chats=args.chats,
            messages=args.messages,
            books=args.books,
        )
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
        print(
            f"folder: {held['characters']} characters, {held['chats']} chats, "
            f"{held['messages']:,} messages, {held['books']} books, {size:,.0f} MiB "
            f"(written in {time.perf_counter() - start:.1f} s)"
        )
        seconds, peak, report = run_storyloom(folder, work / "home-storyloom")
        counts = {c["kind"]: c["added"] for c in report["counts"] if c["added"]}
        print(f"(a) storyloom import-sillytavern: {seconds:.1f} s, peak {peak:,.0f} MiB")
        print(f"    added: {counts}")
        print(f"    problems: {len(report['problems'])}, inactive: {len(report['inactive'])}")
        again, _, second = run_storyloom(folder, work / "home-storyloom")
        changed = sum(c["added"] + c["updated"] for c in second["counts"])
        print(f"    second run: {again:.1f} s, {changed} things added or updated (target 0)")
        baseline = run_baseline(folder, work / "home-baseline")
        print(f"(b) the same files one by one through kb/chat import: {baseline:.1f} s")
        print(f"ratio: {baseline / seconds:.2f} (baseline s / storyloom s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
