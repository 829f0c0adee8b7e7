"""Fuzzing every importer: each hostile file imports or is the project's format error,
a refused file writes nothing, and no case hangs.

Cases are the project's own SillyTavern fixtures (and a ``.ctkbz`` made from one),
mutated: truncation, byte flips, type swaps, huge strings, deep nesting, NaN and
infinity, lone surrogates, huge integers, duplicate keys, broken PNG chunks and hostile
zips (colliding, long or climbing member names, encrypted, unsupported method or version,
corrupt deflate). Beside them, hypothesis builds world-info, card and chat documents of
odd values. Each case goes through the parser (:func:`import_sillytavern_bytes`) and the
project import (:func:`import_knowledge_file`, into a fresh project; it also takes the
``.ctkbz`` path), in this process.

``STORYLOOM_FUZZ_EXAMPLES`` sets the number of mutated cases (CI: 1,500; ``make fuzz``:
20,000) and ``STORYLOOM_FUZZ_SEED`` the seed. The campaign prints its figures: cases,
crashes (a crash kills the process, so a finished run has none), uncaught exceptions,
partial writes and hangs (a case past :data:`HANG_SECONDS`).
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
import signal
import struct
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storyloom.core.errors import InvalidInput
from storyloom.knowledge.knowledge_base import save_knowledge_base
from storyloom.knowledge.package import export_package
from storyloom.knowledge.st_import import import_sillytavern, import_sillytavern_bytes
from storyloom.project.knowledge_import import import_knowledge_file
from storyloom.project.project_file import init_project
from storyloom.sillytavern.png_chunks import PngChunk, encode_png, read_chunks, text_chunk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern"
HANG_SECONDS = 10
EXAMPLES = int(os.environ.get("STORYLOOM_FUZZ_EXAMPLES", "1500"))
SEED = int(os.environ.get("STORYLOOM_FUZZ_SEED", "12"))
SPLICE = "\u0000splice\u0000"


class Hang(Exception):
    """A case ran past :data:`HANG_SECONDS`."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang(f"ran past {HANG_SECONDS} s")


@dataclass
class Figures:
    cases: int = 0
    imported: int = 0
    refused: int = 0
    uncaught: int = 0
    partial_writes: int = 0
    hangs: int = 0
    failures: list[str] = field(default_factory=list)

    def report(self) -> str:
        return (
            f"fuzz: {self.cases} cases, 0 crashes, {self.uncaught} uncaught, "
            f"{self.partial_writes} partial writes, {self.hangs} hangs "
            f"({self.imported} imported, {self.refused} refused)"
        )

    def fail(self, kind: str, name: str, detail: str) -> None:
        if len(self.failures) < 20:
            self.failures.append(f"{kind}: {name}: {detail[:300]}")


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


def _timed(action: Callable[[], Any]) -> Any:
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        return action()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(figures: Figures, name: str, data: bytes) -> None:
    """Both import paths over one case; the outcome goes into ``figures``."""
    figures.cases += 1
    with tempfile.TemporaryDirectory(prefix="fuzz-") as work:
        root = Path(work)
        source = root / "in" / name
        source.parent.mkdir()
        source.write_bytes(data)
        project = root / "proj"
        init_project(project)
        before = _tree(root)
        outcomes = []
        for label, action in (
            ("parse", lambda: import_sillytavern_bytes(data, name)),
            (
                "project import",
                lambda: import_knowledge_file(
                    source, project_dir=project, global_folder=root / "home" / "knowledge"
                ),
            ),
        ):
            if label == "parse" and name.endswith(".ctkbz"):
                continue
            try:
                _timed(action)
                outcomes.append(True)
            except InvalidInput:
                outcomes.append(False)
                if label == "project import" and _tree(root) != before:
                    figures.partial_writes += 1
                    figures.fail("partial write", name, str(_tree(root).keys() - before.keys()))
            except Hang as exc:
                figures.hangs += 1
                figures.fail("hang", name, f"{label} {exc}")
                return
            except Exception as exc:
                figures.uncaught += 1
                figures.fail("uncaught", name, f"{label}: {type(exc).__name__}: {exc}")
                return
        if outcomes and outcomes[-1]:
            figures.imported += 1
        else:
            figures.refused += 1


# --- mutations ------------------------------------------------------------------


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _paths(child, (*path, i))


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _splices(rng: random.Random) -> str:
    """Raw JSON text no ``json.dumps`` writes: deep nesting, huge integers, NaN..."""
    depth = rng.choice([150, 1000, 100_000])
    return rng.choice(
        [
            "[" * depth + "]" * depth,
            '{"a":' * depth + "0" + "}" * depth,
            "9" * rng.choice([200, 5000, 50_000]),
            "NaN",
            "-Infinity",
            "1e999",
            '"\\ud800"',
            '"a\\udfffb"',
        ]
    )


def mutate_json(rng: random.Random, text: str) -> str:
    """``text`` (a JSON document) with one value changed in one hostile way."""
    document = json.loads(text)
    paths = list(_paths(document))
    target = rng.choice(paths)
    kind = rng.randrange(7)
    if kind == 0:  # type swap
        new: Any = rng.choice([None, 0, -1, "", [], {}, True, 1.5, "text", [None], {"k": []}])
    elif kind == 1:  # huge string
        new = rng.choice(["k" * 700_000, "汉" * 5000, "x" * 3000])
    elif kind == 2:  # huge string inside a list (a key, a tag)
        new = ["w" * rng.choice([2001, 700_000])]
    elif kind == 3:
        new = SPLICE
    elif kind == 4:  # lone surrogate, written raw so no escape hides it
        new = rng.choice(["\ud800", "tail \udc00", "\udbff\udbff"])
    elif kind == 5:  # float specials through json.dumps
        new = rng.choice([float("nan"), float("inf"), -float("inf"), 1e308])
    else:  # duplicate key: the object's first key again with junk
        out = json.dumps(document, ensure_ascii=False)
        first = out.find("{")
        if first != -1 and isinstance(document, dict) and document:
            key = json.dumps(next(iter(document)))
            return out[: first + 1] + f"{key}: {_splices(rng)}, " + out[first + 1 :]
        return out
    out = json.dumps(_replace(document, target, new), ensure_ascii=kind == 4 and rng.random() < 0.5)
    return out.replace(json.dumps(SPLICE), _splices(rng))


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice([1, 2, 8, 64])):
        out[rng.randrange(len(out))] ^= rng.randrange(1, 256)
    return bytes(out)


def _chunk_of_card(png: bytes) -> tuple[list[PngChunk], int, str]:
    chunks = read_chunks(png)
    for i, chunk in enumerate(chunks):
        if chunk.type == b"tEXt":
            payload = chunk.data.partition(b"\0")[2]
            return chunks, i, base64.b64decode(payload).decode("utf-8")
    raise LookupError("no card chunk")


def mutate_png(rng: random.Random, png: bytes) -> bytes:
    kind = rng.randrange(3)
    if kind == 0:  # the card JSON inside mutated, the PNG intact
        chunks, index, text = _chunk_of_card(png)
        keyword = chunks[index].data.partition(b"\0")[0].decode("latin-1")
        mutated = mutate_json(rng, text).encode("utf-8", "surrogatepass")
        chunks[index] = text_chunk(keyword, base64.b64encode(mutated).decode("ascii"))
        return encode_png(chunks)
    out = bytearray(png)
    start = png.find(b"tEXt") - 4
    if start < 0:
        return flip(rng, png)
    if kind == 1:  # a chunk length past the end, or zero
        out[start : start + 4] = struct.pack(">I", rng.choice([0, 0x7FFFFFFF, len(png) * 2]))
    else:  # a bad CRC or a payload byte changed
        (length,) = struct.unpack(">I", png[start : start + 4])
        spot = start + 8 + rng.randrange(max(length, 1) + 4)
        out[min(spot, len(out) - 1)] ^= 0xFF
    return bytes(out)


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def _patch(data: bytes, signature: bytes, offset: int, value: bytes) -> bytes:
    out = bytearray(data)
    start = out.find(signature)
    while start != -1:
        out[start + offset : start + offset + len(value)] = value
        start = out.find(signature, start + 4)
    return bytes(out)


def mutate_zip(rng: random.Random, data: bytes, json_member: str) -> bytes:
    members = _members(data)
    kind = rng.randrange(5)
    if kind == 0:
        members[json_member] = mutate_json(rng, members[json_member].decode("utf-8")).encode(
            "utf-8", "surrogatepass"
        )
        return _zip(members)
    if kind == 1:
        hostile = rng.choice(
            [
                {"assets/x": b"1", "assets/x/y": b"2"},
                {"assets/" + "n" * 300: b"1"},
                {"media/" + "m" * 300: b"1"},
                {"../escape": b"1"},
                {"assets//double": b"1"},
                {"media/a": b"1", "media/a/b": b"2"},
                {"/abs": b"1"},
            ]
        )
        return _zip({**members, **hostile})
    zipped = _zip(members)
    if kind == 2:  # encrypted flag, unsupported method, unsupported version
        which = rng.randrange(3)
        if which == 0:
            return _patch(_patch(zipped, b"PK\x03\x04", 6, b"\x01"), b"PK\x01\x02", 8, b"\x01")
        if which == 1:
            method = struct.pack("<H", rng.choice([1, 6, 97, 99]))
            return _patch(_patch(zipped, b"PK\x03\x04", 8, method), b"PK\x01\x02", 10, method)
        return _patch(zipped, b"PK\x01\x02", 6, struct.pack("<H", 99))
    if kind == 3:  # corrupt deflate data of the first member
        cut = 30 + rng.randrange(20, 60)
        return zipped[:30] + flip(rng, zipped[30:cut]) + zipped[cut:]
    return rng.choice([truncate, flip])(rng, zipped)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, bytes]]:
    found = [(p.name, p.read_bytes()) for p in sorted(FIXTURES.iterdir()) if p.is_file()]
    work = tmp_path_factory.mktemp("seed")
    kb = import_sillytavern(FIXTURES / "world_info_lanternfall_2024.json").knowledge_bases[0]
    save_knowledge_base(kb, work / "kb")
    (work / "kb" / "media" / "map.png").write_bytes(b"\x89PNG not really")
    export_package(work / "kb", work / "lanternfall.ctkbz", include_vectors=False)
    found.append(("lanternfall.ctkbz", (work / "lanternfall.ctkbz").read_bytes()))
    return found


def mutated_cases(seeds: list[tuple[str, bytes]], count: int) -> Iterator[tuple[str, bytes]]:
    rng = random.Random(SEED)
    for _ in range(count):
        name, data = rng.choice(seeds)
        if rng.random() < 0.15:
            yield name, rng.choice([truncate, flip])(rng, data)
        elif name.endswith(".png"):
            yield name, mutate_png(rng, data)
        elif name.endswith(".charx"):
            yield name, mutate_zip(rng, data, "card.json")
        elif name.endswith(".ctkbz"):
            yield name, mutate_zip(rng, data, "knowledge.json")
        elif name.endswith(".jsonl"):
            lines = data.decode("utf-8").split("\n")
            i = rng.randrange(len(lines))
            lines[i] = mutate_json(rng, lines[i]).replace("\n", " ")
            yield name, "\n".join(lines).encode("utf-8", "surrogatepass")
        else:
            yield name, mutate_json(rng, data.decode("utf-8-sig")).encode("utf-8", "surrogatepass")


def test_mutated_fixtures_import_or_are_refused_and_a_refusal_writes_nothing(
    seeds: list[tuple[str, bytes]],
) -> None:
    figures = Figures()
    for name, data in mutated_cases(seeds, EXAMPLES):
        run_case(figures, name, data)
    print("\n" + figures.report())
    assert figures.uncaught == figures.partial_writes == figures.hangs == 0, (
        figures.report() + "\n" + "\n".join(figures.failures)
    )
    # The mutations reach both outcomes, so the campaign tests what it claims.
    assert figures.imported > 0 and figures.refused > 0, figures.report()


# --- generated documents --------------------------------------------------------

_text = st.text(st.characters(codec=None), max_size=12) | st.sampled_from(
    ["\ud800", "a\udc00", "x" * 2001, ""]
)
_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _text
)
_value = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "uid": _value,
        "key": st.lists(_text, max_size=3) | _value,
        "keysecondary": _value,
        "content": _text | _value,
        "comment": _value,
        "order": _value,
        "position": _value,
        "depth": _value,
        "probability": _value,
        "extensions": _value,
        "disable": _value,
        "constant": _value,
    },
)
_documents = st.one_of(
    st.fixed_dictionaries({"entries": st.dictionaries(st.sampled_from("0123"), _entry)}),
    st.fixed_dictionaries(
        {
            "spec": st.just("chara_card_v2"),
            "data": st.fixed_dictionaries(
                {"name": _text},
                optional={
                    "description": _value,
                    "character_book": st.fixed_dictionaries(
                        {"entries": st.lists(_entry, max_size=3)}
                    ),
                    "extensions": _value,
                    "alternate_greetings": _value,
                },
            ),
        }
    ),
    st.fixed_dictionaries({"user_name": _text, "chat_metadata": _value}),
)


@settings(
    max_examples=min(EXAMPLES // 5, 2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(document=_documents, as_chat=st.booleans())
def test_generated_documents_import_or_are_refused_cleanly(document: Any, as_chat: bool) -> None:
    text = json.dumps(document, ensure_ascii=False)
    if as_chat and "user_name" in document:
        text += "\n" + json.dumps({"name": "A", "is_user": True, "mes": document["user_name"]})
    figures = Figures()
    run_case(figures, "generated.json", text.encode("utf-8", "surrogatepass"))
    assert figures.uncaught == figures.partial_writes == figures.hangs == 0, figures.failures


def test_the_hang_detector_stops_a_case_that_runs_too_long() -> None:
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        with pytest.raises(Hang):
            while True:
                pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
