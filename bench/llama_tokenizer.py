"""How fast storyloom counts LLaMA tokens, against llama-tokenizer-js run by node.

On a seeded synthetic book (default 250 entries of mixed English and Chinese lore, about
1,000 characters each) it prints:

- loading: reading the data file and building the merge table (once per process);
- cold: ms to encode every entry with a fresh tokenizer (no word kept yet), and the
  characters per second;
- warm: the same again once the words are known (a chat counts the same words turn
  after turn), and a ``LlamaCounter`` that has counted these texts before;
- the reference: llama-tokenizer-js encoding the same entries in node, timed inside node
  (skipped when node or ``.cache/llama-tokenizer-js`` is missing), whether its ids are
  the same, and ``ratio: <node_ms / storyloom_cold_ms>``.

Prints figures, asserts nothing.

    .venv/bin/python bench/llama_tokenizer.py [--entries 250] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from storyloom.llm.llama_tokenizer import LlamaCounter, LlamaTokenizer
from storyloom.llm.llama_vocab import load_vocabulary

REPO = Path(__file__).resolve().parents[1]
PACKAGE_JS = REPO / ".cache" / "llama-tokenizer-js" / "package" / "llama-tokenizer.js"

VOCABULARY = (
    "the lighthouse keeper climbs stairs every dusk and trims wick while storm gathers over "
    "harbour where fishermen mend nets sing old songs about drowned kingdom beneath waves "
    "Maren Hennet Lanternfall Lowmere dragon Ember guards northern pass snowed autumn spring"
)
HANZI = "秦始皇统一六国建立了中国历史上第一个大一统王朝灯塔与潮汐守夜人每到黄昏便登上台阶修剪灯芯"
PUNCTUATION = [", ", ". ", "; ", "! ", "? ", "\n", " — ", "，", "。", "「", "」"]


def book(entries: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    words = VOCABULARY.split()
    texts = []
    for _ in range(entries):
        parts: list[str] = []
        while sum(map(len, parts)) < 1000:
            if rng.random() < 0.3:
                start = rng.randrange(len(HANZI) - 12)
                parts.append(HANZI[start : start + rng.randint(4, 12)])
            else:
                parts.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))))
            parts.append(rng.choice(PUNCTUATION))
        texts.append("".join(parts))
    return texts


def best_ms(run: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def node_reference(texts: list[str], rounds: int) -> tuple[float, list[list[int]]] | None:
    if shutil.which("node") is None or not PACKAGE_JS.is_file():
        return None
    script = f"""
import tokenizer from {json.dumps(PACKAGE_JS.as_uri())};
let input = '';
process.stdin.on('data', chunk => input += chunk);
process.stdin.on('end', () => {{
  const texts = JSON.parse(input);
  let best = Infinity, ids = null;
  for (let round = 0; round < {rounds}; round++) {{
    const start = performance.now();
    ids = texts.map(t => tokenizer.encode(t, false, true));
    best = Math.min(best, performance.now() - start);
  }}
  process.stdout.write(JSON.stringify({{ ms: best, ids }}));
}});
"""
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(done.stdout)
    return float(answer["ms"]), answer["ids"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    vocabulary = load_vocabulary()
    loaded = time.perf_counter()
    LlamaTokenizer(vocabulary)
    built = time.perf_counter()
    print(
        f"loading: data file {(loaded - start) * 1000:.0f} ms, merge table "
        f"{(built - loaded) * 1000:.0f} ms"
    )

    texts = book(args.entries)
    chars = sum(map(len, texts))
    print(f"book: {len(texts)} entries, {chars:,} characters")

    timings = []
    for _ in range(args.rounds):
        tokenizer = LlamaTokenizer(vocabulary)
        begin = time.perf_counter()
        ids = [tokenizer.encode(text) for text in texts]
        timings.append((time.perf_counter() - begin) * 1000)
    cold_ms = min(timings)
    tokens = sum(map(len, ids))
    print(f"cold: {cold_ms:.1f} ms, {tokens:,} tokens, {chars / cold_ms / 1000:.2f} M chars/s")
    warm_ms = best_ms(lambda: [tokenizer.encode(text) for text in texts], args.rounds)
    print(f"warm (words known): {warm_ms:.1f} ms")
    counter = LlamaCounter(tokenizer)
    for text in texts:
        counter.count(text)
    counted_ms = best_ms(lambda: [counter.count(text) for text in texts], args.rounds)
    print(f"counter, texts counted before: {counted_ms:.2f} ms")

    reference = node_reference(texts, args.rounds)
    if reference is None:
        print("reference: node or .cache/llama-tokenizer-js missing (make setup)")
        return
    node_ms, node_ids = reference
    print(f"llama-tokenizer-js (node): {node_ms:.1f} ms; same ids: {node_ids == ids}")
    print(f"ratio: {node_ms / cold_ms:.2f}")


if __name__ == "__main__":
    main()
