"""storyloom's LLaMA tokenizer gives the ids of llama-tokenizer-js, SillyTavern's count.

The reference is the package itself, run by ``node`` from the copy ``make setup`` packs
into ``.cache/llama-tokenizer-js/``: one node process answers every batch of texts.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.llm.llama_tokenizer import LlamaCounter, LlamaTokenizer, bundled_llama_counter
from storyloom.llm.llama_vocab import (
    DATA_FILE,
    build_data_file,
    load_vocabulary,
    read_package_source,
)

REPO = Path(__file__).resolve().parents[2]
PACKAGE_JS = REPO / ".cache" / "llama-tokenizer-js" / "package" / "llama-tokenizer.js"

# Reads one JSON array of texts per line and answers one JSON array of id lists per
# line: encode(text, add_bos_token=false, add_preceding_space=true), SillyTavern's count.
NODE_SCRIPT = """
import tokenizer from %s;
import { createInterface } from 'node:readline';
for await (const line of createInterface({ input: process.stdin })) {
  const texts = JSON.parse(line);
  process.stdout.write(JSON.stringify(texts.map(t => tokenizer.encode(t, false, true))) + '\\n');
}
"""


class NodeReference:
    """llama-tokenizer-js in a node process."""

    def __init__(self, package_js: Path) -> None:
        script = NODE_SCRIPT % json.dumps(package_js.as_uri())
        self.process = subprocess.Popen(
            ["node", "--input-type=module", "-e", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def encode(self, texts: list[str]) -> list[list[int]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        # ensure_ascii: lone surrogates travel as \\uXXXX escapes, which JSON.parse keeps.
        self.process.stdin.write(json.dumps(texts) + "\n")
        self.process.stdin.flush()
        answer: list[list[int]] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def reference() -> Iterator[NodeReference]:
    if shutil.which("node") is None:
        pytest.fail("node is not installed: make test needs Node.js, the reference runs on it")
    if not PACKAGE_JS.is_file():
        pytest.fail(f"{PACKAGE_JS} is missing: `make setup` packs llama-tokenizer-js there")
    node = NodeReference(PACKAGE_JS)
    yield node
    node.close()


@pytest.fixture(scope="module")
def counter() -> LlamaCounter:
    try:
        return bundled_llama_counter()
    except OSError:
        pytest.fail(f"{DATA_FILE} is missing: `make setup` builds it")


@pytest.fixture(scope="module")
def tokenizer(counter: LlamaCounter) -> LlamaTokenizer:
    return counter.tokenizer


def test_the_readme_example_gives_its_ids(tokenizer: LlamaTokenizer) -> None:
    assert tokenizer.encode("Hello world!", bos=True) == [1, 15043, 3186, 29991]
    assert tokenizer.encode("Hello world!") == [15043, 3186, 29991]
    assert tokenizer.decode([15043, 3186, 29991]) == "Hello world!"


# The package's own test cases (ids with BOS): merge order, spaces, byte fallback.
PACKAGE_CASES = [
    ("grabbed", [1, 2646, 1327, 287]),
    (" grabbed", [1, 29871, 2646, 1327, 287]),
    ("           grabbed", [1, 9651, 2646, 1327, 287]),
    ("\n", [1, 29871, 13]),
    (" \n", [1, 259, 13]),
    ("\ttabs\t\t\t\tout here", [1, 29871, 12, 21175, 12, 12, 12, 12, 449, 1244]),
    ("ax\n####\nboo", [1, 4853, 13, 4136, 13, 833, 29877]),
    ("镇", [1, 29871, 30411]),
    ("🦙", [1, 29871, 243, 162, 169, 156]),
    ("🦙Ꙋ", [1, 29871, 243, 162, 169, 156, 237, 156, 141]),
    ("Ꙋ🦙", [1, 29871, 237, 156, 141, 243, 162, 169, 156]),
]


@pytest.mark.parametrize(("text", "ids"), PACKAGE_CASES)
def test_the_package_test_cases_give_their_ids(
    tokenizer: LlamaTokenizer, text: str, ids: list[int]
) -> None:
    assert tokenizer.encode(text, bos=True) == ids
    assert tokenizer.decode(ids) == text


LORE = (
    "Maren keeps the lighthouse at Lanternfall. Every dusk she climbs the 212 steps, "
    "trims the wick, and writes the weather in a ledger nobody reads.\n\n"
    "秦始皇统一六国，建立了中国历史上第一个大一统王朝；灯塔与潮汐。"
    "「你好」と言った。😀🦙👩‍👩‍👧 — «quoted» ‘text’… ½ × ÷ ∑ ∞\n"
    "    indented code: if (x >= 10) { return y[i] * 2; }\r\n\t\tTabbed\u00a0line\u200b.\n"
)
HAND_PICKED = [
    "",
    " ",
    "   ",
    "\n\n\n",
    "a  b   c    d     e",
    "Hello, world! How's it going?",
    "The quick brown fox jumps over the lazy dog " * 5,
    "秦始皇统一六国，建立了中国历史上第一个大一统王朝。",
    "Привет, мир! Ελληνικά. العربية. עברית. हिन्दी. 한국어. ไทย",
    "😀😃😄😁🦙🏳️‍🌈👍🏽",
    "\x00\x01\x7f\x80\u0085\ufeff\ufffd\U0010ffff\uffff",
    "\ud800 lone \udfff surrogates \ud83e\udd99 paired",
    "literal \u2581 lower one eighth block \u2581\u2581",
    "e\u0301 vs é, ﬁ ligature, Ｆｕｌｌｗｉｄｔｈ",
    LORE,
    LORE * 40,
]


def test_hand_picked_texts_give_the_ids_of_the_reference(
    tokenizer: LlamaTokenizer, reference: NodeReference
) -> None:
    expected = reference.encode(HAND_PICKED)
    for text, ids in zip(HAND_PICKED, expected, strict=True):
        assert tokenizer.encode(text) == ids, text[:60]
        assert tokenizer.count(text) == len(ids)


FRAGMENTS = [
    " ",
    "  ",
    "\n",
    "\t",
    "\u2581",
    " the",
    "ing",
    "ed ",
    " grabbed",
    "####",
    "镇",
    "的",
    "世界",
    "🦙",
    "Ꙋ",
    "\ud800",
    "\udd99",
    "\ud83e",
    "\x00",
    "\ufffd",
    "e\u0301",
]
TEXTS = st.lists(
    st.one_of(st.characters(), st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=40
).map("".join)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=25))
def test_random_texts_give_the_ids_of_the_reference(
    tokenizer: LlamaTokenizer, reference: NodeReference, texts: list[str]
) -> None:
    expected = reference.encode(texts)
    assert [tokenizer.encode(text) for text in texts] == expected


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_decoding_gives_back_the_text(text: str) -> None:
    tokenizer = bundled_tokenizer()
    # ▁ is how the vocabulary writes a space: it decodes as one.
    assert tokenizer.decode(tokenizer.encode(text)) == text.replace("\u2581", " ")


def bundled_tokenizer() -> LlamaTokenizer:
    try:
        return bundled_llama_counter().tokenizer
    except OSError:
        pytest.fail(f"{DATA_FILE} is missing: `make setup` builds it")


def test_the_counter_counts_without_bos_and_keeps_its_counts(counter: LlamaCounter) -> None:
    assert counter.count("") == 0
    assert counter.count("Hello world!") == 3
    assert counter.count(LORE) == len(counter.encode(LORE))
    assert LORE in counter._counts
    assert counter.name == "llama (bundled)"
    message = {"role": "user", "content": "Hello world!"}
    assert counter.count_message(message) == 3 + counter.count("user") + 3


# -- the data file ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def package_js() -> Path:
    if not PACKAGE_JS.is_file():
        pytest.fail(f"{PACKAGE_JS} is missing: `make setup` packs llama-tokenizer-js there")
    return PACKAGE_JS


def test_building_the_data_file_twice_gives_the_same_bytes(
    package_js: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    vocabulary = build_data_file(package_js, first)
    build_data_file(package_js, second)
    assert first.read_bytes() == second.read_bytes()
    assert load_vocabulary(first) == vocabulary
    assert len(vocabulary.pieces) == 32_000 and len(vocabulary.merges) == 61_249


def test_another_version_of_the_package_is_refused(package_js: Path, tmp_path: Path) -> None:
    changed = package_js.read_text(encoding="utf-8").replace("BOS_TOKEN_ID = 1", "BOS = 1")
    with pytest.raises(ValueError, match=r"not the llama-tokenizer\.js of llama-tokenizer-js@"):
        read_package_source(changed)
    out = tmp_path / "vocab.json.gz"
    js = tmp_path / "llama-tokenizer.js"
    js.write_text(changed, encoding="utf-8")
    with pytest.raises(ValueError):
        build_data_file(js, out)
    assert not out.exists()


def test_a_missing_or_damaged_data_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        bundled_llama_counter(tmp_path / "missing.json.gz")
    damaged = tmp_path / "damaged.json.gz"
    damaged.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a LLaMA vocabulary file"):
        load_vocabulary(damaged)
    other = tmp_path / "other.json.gz"
    other.write_bytes(gzip.compress(b'{"format": 99}'))
    with pytest.raises(ValueError, match="format 1"):
        load_vocabulary(other)
