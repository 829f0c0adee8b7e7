"""A seeded corpus of model outputs that do, or only seem to, call tools through TAM.

Each output comes with the calls that must be executed from it (tool id and arguments,
in order): none for a call inside a code fence, inline code, a quoted line or quotation
marks, for a truncated or malformed block, and for roleplay that only talks about tools.
The same seed gives the same corpus. ``bench/tools.py`` measures the parser on it.

Kinds (about 30 outputs each at the default size of 360):

- ``single``, ``chain``, ``several``: calls that must run; values hold multi-line prose,
  code, JSON, XML and Chinese; keys vary in case and underscores, ``：`` for ``:``,
  indentation, ``# 步骤`` comments, CRLF line ends, a block glued to the text before it;
- ``fenced``, ``inline``, ``quoted``, ``quotation``: the same calls where they must not
  run; ``fenced_then_real``: an example in a fence, then a real call;
- ``truncated``: the stream cut mid-value, before ``「末」`` or before ``<|[END_TOOL]|>``;
  ``unclosed_value``: ``「末」`` forgotten before the end marker; ``no_command``: a
  block that forgot ``「始」``;
- ``roleplay``: replies that mention ``REQUEST_TOOL``, ``「始」``/``「末」``, tool ids and
  ``command:`` in prose, without a block.

    .venv/bin/python bench/tool_outputs.py [--size 360] [--seed 14] [--write FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

START = "<|[REQUEST_TOOL]|>"
END = "<|[END_TOOL]|>"

Call = tuple[str, dict[str, str]]


@dataclass(frozen=True)
class CorpusOutput:
    kind: str
    output: str
    expected: list[Call] = field(default_factory=list)


TOOLS: dict[str, list[str]] = {
    "chat:RollDice": ["sides", "count", "reason"],
    "kb:Query": ["query", "limit"],
    "kb:ReadEntry": ["kb", "entry_id"],
    "kb:CreateEntry": ["kb", "title", "content", "tags"],
    "kb:UpdateEntry": ["kb", "entry_id", "content"],
    "chat:GetVariable": ["path"],
    "chat:SetVariable": ["path", "value"],
    "system:get_current_time": [],
    "workflow:summarize-chapter": ["chapter", "style"],
    "FileOperator.ApplyEdit": ["filePath", "search_string", "replace_string"],
}

ZH_PROSE = [
    "好的，我来查一下设定集。",
    "让我先掷个骰子决定结果。",
    "我会把这段新的世界观写进知识库。",
    "少女抬起头，望向远处的钟楼。",
    "先确认一下当前的变量，再继续剧情。",
]
EN_PROSE = [
    "Let me check the lore first.",
    "I'll roll for the ambush.",
    "Saving this to the knowledge base so we remember it.",
    "She glanced at the map and frowned.",
    "One moment while I look that up.",
]
VALUES: list[Callable[[random.Random], str]] = [
    lambda r: r.choice(["20", "6", "3", "100"]),
    lambda r: r.choice(["dragons of the north", "The Silver Gate", "who rules Varn?"]),
    lambda r: r.choice(["北境的巨龙", "银门之战的起因", "艾琳的童年", "钟楼下的密室"]),
    lambda r: "第一段。\n第二段：她说“别回头”。\n\n第三段，结束。",
    lambda r: 'def roll(n):\n    return [random.randint(1, 6) for _ in range(n)]  # "d6"\n',
    lambda r: json.dumps(
        {"name": r.choice(["Eira", "艾琳"]), "hp": r.randint(1, 99), "tags": ["a", "b"]},
        ensure_ascii=r.random() < 0.5,
        indent=r.choice([None, 2]),
    ),
    lambda r: '<entry id="7"><title>钟楼</title><body>a &lt; b</body></entry>',
    lambda r: "```python\nprint('a fence inside a value')\n```",
    lambda r: "> a quoted line inside a value\n`inline` too",
    lambda r: f"  padded {r.randint(0, 9)}  ",
    lambda r: "stats.hp",
    lambda r: "「引号」与『书名号』都可以出现在值里",
]


def _key(rng: random.Random, name: str) -> str:
    """How a model might spell ``name``: as is, capitalised, snake or camel case."""
    choice = rng.random()
    if choice < 0.6 or "_" in name:
        return name
    if choice < 0.8:
        return name[:1].upper() + name[1:]
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _command_key(rng: random.Random, suffix: str = "") -> str:
    base = rng.choice(["command"] * 6 + ["Command", "COMMAND"])
    if suffix and rng.random() < 0.2:
        return f"{base}_{suffix}"
    return base + suffix


def _colon(rng: random.Random) -> str:
    return rng.choice([":"] * 8 + ["：", " : "])


def _call(rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    tool = rng.choice(list(TOOLS))
    names = TOOLS[tool]
    chosen = [n for n in names if rng.random() < 0.75] or names[:1]
    return tool, [(_key(rng, n), rng.choice(VALUES)(rng)) for n in chosen]


def _block(
    rng: random.Random, calls: list[tuple[str, list[tuple[str, str]]]], *, crlf: bool = False
) -> str:
    lines = [START]
    chained = len(calls) > 1 or rng.random() < 0.1
    indent = rng.choice(["", "", "", "  "])
    for number, (tool, arguments) in enumerate(calls, start=1):
        suffix = str(number) if chained else ""
        if chained and rng.random() < 0.6:
            lines.append(rng.choice([f"# 步骤 {number}", f"# step {number}: {tool}", ""]))
        lines.append(f"{indent}{_command_key(rng, suffix)}{_colon(rng)}「始」{tool}「末」")
        for key, value in arguments:
            sep = "_" if chained and rng.random() < 0.1 else ""
            lines.append(f"{indent}{key}{sep}{suffix}{_colon(rng)}「始」{value}「末」")
    lines.append(END)
    newline = "\r\n" if crlf else "\n"
    return newline.join(lines)


def _expected(calls: list[tuple[str, list[tuple[str, str]]]]) -> list[Call]:
    return [(tool, dict(arguments)) for tool, arguments in calls]


def _prose(rng: random.Random) -> str:
    return rng.choice(ZH_PROSE + EN_PROSE)


def _single(rng: random.Random) -> CorpusOutput:
    call = _call(rng)
    crlf = rng.random() < 0.1
    block = _block(rng, [call], crlf=crlf)
    glue = rng.choice(["\n\n", "\n", " ", ""])
    after = rng.choice(["", "\n\n" + _prose(rng), "\n（等待结果）"])
    return CorpusOutput("single", _prose(rng) + glue + block + after, _expected([call]))


def _chain(rng: random.Random) -> CorpusOutput:
    calls = [_call(rng) for _ in range(rng.randint(2, 4))]
    return CorpusOutput("chain", _prose(rng) + "\n" + _block(rng, calls), _expected(calls))


def _several(rng: random.Random) -> CorpusOutput:
    first = [_call(rng) for _ in range(rng.randint(1, 2))]
    second = [_call(rng)]
    output = (
        _prose(rng) + "\n" + _block(rng, first) + "\n" + _prose(rng) + "\n" + _block(rng, second)
    )
    return CorpusOutput("several", output, _expected(first + second))


def _fenced(rng: random.Random) -> CorpusOutput:
    fence = rng.choice(["```", "```text", "~~~", "````tam"])
    close = fence.rstrip("texam") if fence.startswith("`") else fence
    block = _block(rng, [_call(rng)])
    output = f"{_prose(rng)} For example:\n{fence}\n{block}\n{close}\n{_prose(rng)}"
    return CorpusOutput("fenced", output)


def _inline(rng: random.Random) -> CorpusOutput:
    tool, arguments = _call(rng)
    pairs = "".join(f"{k}:「始」{v}「末」" for k, v in arguments if "\n" not in v)
    output = f"The syntax is `{START}command:「始」{tool}「末」{pairs}{END}`, all on one line."
    return CorpusOutput("inline", output)


def _quoted(rng: random.Random) -> CorpusOutput:
    block = _block(rng, [_call(rng)])
    quoted = "\n".join("> " + line for line in block.split("\n"))
    return CorpusOutput("quoted", f"You wrote:\n{quoted}\n\n{_prose(rng)}")


def _quotation(rng: random.Random) -> CorpusOutput:
    block = _block(rng, [_call(rng)])
    left, right = rng.choice([("“", "”"), ("「", "」"), ('"', '"'), ("『", "』")])
    speaker = rng.choice(["他念出卷轴上的字：", "The wizard read aloud: ", "她模仿道："])
    return CorpusOutput("quotation", f"{speaker}{left}{block}{right}")


def _fenced_then_real(rng: random.Random) -> CorpusOutput:
    example = _block(rng, [_call(rng)])
    call = _call(rng)
    output = (
        f"Here is how a call looks:\n```\n{example}\n```\n"
        f"Now for real:\n{_block(rng, [call])}\n{_prose(rng)}"
    )
    return CorpusOutput("fenced_then_real", output, _expected([call]))


def _truncated(rng: random.Random) -> CorpusOutput:
    call = _call(rng)
    block = _block(rng, [call])
    cut = rng.choice(["mid-value", "before-close", "before-end"])
    if cut == "before-end":
        output = block[: block.rindex(END)] + rng.choice(["", "<|[END_TO"])
    elif cut == "before-close":
        output = block[: block.rindex("「末」")]
    else:
        value_at = block.rindex("「始」") + 3
        close_at = block.index("「末」", value_at)
        output = block[: value_at + max(0, (close_at - value_at) // 2)]
    return CorpusOutput("truncated", _prose(rng) + "\n" + output)


def _unclosed_value(rng: random.Random) -> CorpusOutput:
    tool, _arguments = _call(rng)
    content = rng.choice(VALUES)(rng)
    output = f"{START}\ncommand:「始」{tool}「末」\ncontent:「始」{content}\n{END}"
    return CorpusOutput("unclosed_value", _prose(rng) + "\n" + output)


def _no_command(rng: random.Random) -> CorpusOutput:
    tool, arguments = _call(rng)
    lines = [f"command: {tool}", *(f"{k}: {v}" for k, v in arguments)]
    return CorpusOutput("no_command", "\n".join([START, *lines, END]))


ROLEPLAY = [
    "老法师捋着胡子说：古卷里写着 REQUEST_TOOL 这个咒语，可没人知道它的意思。",
    "「始」与「末」，是这座城的两道城门。她从「始」门进城，却再也没能走到「末」门。",
    "He muttered something about a command: roll the dice, he said, and let fate decide.",
    "The terminal blinked: REQUEST_TOOL denied. END_TOOL. She laughed and closed the lid.",
    "I could call kb:Query here, but honestly I remember the answer: the gate is silver.",
    "书页上印着奇怪的符号 <|[REQUEST_TOOL]|>，后面什么也没有。",
    "The sign above the door read `<|[END_TOOL]|>` in faded paint.",
    "command：「始」这不是调用「末」——只是一句台词，而且没有任何标记。",
    "> REQUEST_TOOL, she typed, then deleted it.",
    "```\nchat:RollDice sides=20\n```\nThat is just how the old bot liked its dice written.",
]


MARKED = {5, 6, 7}
"""Lines holding a marker or ``command：「始」``: two of them together could form a real
block (a start marker, then a command line, then an end marker), so at most one is used."""


def _roleplay(rng: random.Random) -> CorpusOutput:
    picked = rng.sample(range(len(ROLEPLAY)), rng.randint(1, 3))
    marked = [i for i in picked if i in MARKED]
    parts = [ROLEPLAY[i] for i in picked if i not in MARKED or i == (marked or [-1])[0]]
    return CorpusOutput("roleplay", "\n\n".join([_prose(rng), *parts]))


BUILDERS: list[Callable[[random.Random], CorpusOutput]] = [
    _single,
    _chain,
    _several,
    _fenced,
    _inline,
    _quoted,
    _quotation,
    _fenced_then_real,
    _truncated,
    _unclosed_value,
    _no_command,
    _roleplay,
]


def build_corpus(size: int = 360, seed: int = 14) -> list[CorpusOutput]:
    """``size`` outputs, the kinds in turn, from one seeded generator."""
    rng = random.Random(seed)
    return [BUILDERS[i % len(BUILDERS)](rng) for i in range(size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=360)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--write", type=Path, help="write the corpus as JSON lines")
    args = parser.parse_args()
    corpus = build_corpus(args.size, args.seed)
    if args.write:
        with args.write.open("w", encoding="utf-8") as out:
            for item in corpus:
                out.write(json.dumps(asdict(item), ensure_ascii=False) + "\n")
    kinds: dict[str, int] = {}
    for item in corpus:
        kinds[item.kind] = kinds.get(item.kind, 0) + 1
    print(
        f"{len(corpus)} outputs (seed {args.seed}): "
        + ", ".join(f"{k} {n}" for k, n in kinds.items())
    )


if __name__ == "__main__":
    main()
