"""Regex scripts against JavaScript itself: random patterns, flags and texts, replaced by
node's RegExp and by storyloom's translation, must give the same text, and a pattern
JavaScript refuses must be refused (its script skipped) here too.

The texts mix ASCII with the characters where Python and JavaScript disagree (``ſ``, the
Kelvin sign, U+FEFF, U+0085, astral characters...). Node.js is a requirement of
``make test`` (it builds the web app), so a missing node fails here rather than skipping.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.chat.prompt.regex_scripts import compile_find_regex

NODE = shutil.which("node")

ORACLE = r"""
let input = '';
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const out = JSON.parse(input).map(([pattern, flags, text]) => {
    let re;
    try { re = new RegExp(pattern, flags); } catch (e) { return null; }
    const replaced = text.replace(re, (...args) => '<' + args[0] + '>');
    // a lone surrogate cannot be stored: storyloom writes U+FFFD, so compare that
    const high = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/g;
    const low = /(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
    return replaced.replace(high, '\uFFFD').replace(low, '\uFFFD');
  });
  process.stdout.write(JSON.stringify(out));
});
"""

ATOMS = [
    "a", "A", "s", "k", "\u017f", "\u212a", "ß", "é", "σ", "Σ", "ς", "İ", ".", "\\s", "\\S",
    "\\w", "\\W", "\\d", "\\b", "\\B", "\\1", "\\2", "\\8", "\\12", "\\0", "\\x41", "\\u0061",
    "[a-c]", "[^a]", "[\\s\\d]", "[\\S]", "[^\\W]", "[\\1]", "😀", "[😀]", "^", "$", "(a)",
    "(?:b)", "(?<n>a)", "\\k<n>", "(?=a)", "(?!a)", "(?<=a)", "(?<!b)", "x{2}", "{", "a|b",
    "\\.", "\ufeff", " ",
]  # fmt: skip
TEXT = "aAbBsSſkK\u212aßẞσΣςİıéÉ\ufeff\x85\xa0\n 12😀x.-_\x01"

case = st.tuples(
    st.lists(
        st.tuples(st.sampled_from(ATOMS), st.sampled_from(["", "", "*", "+", "?", "*?"])),
        min_size=1,
        max_size=4,
    ).map(lambda parts: "".join(a + q for a, q in parts)),
    st.sampled_from(["g", "gi", "gu", "giu", "gm", "gs"]),
    st.text(alphabet=TEXT, max_size=12),
)


def node_replace(cases: list[tuple[str, str, str]]) -> list[str | None]:
    assert NODE is not None, "node is not installed (make test needs Node.js)"
    done = subprocess.run(
        [NODE, "-e", ORACLE],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    )
    result: list[str | None] = json.loads(done.stdout)
    return result


@settings(max_examples=6, deadline=None)
@given(st.lists(case, min_size=60, max_size=60))
def test_scripts_replace_as_javascript_does(cases: list[tuple[str, str, str]]) -> None:
    for (pattern, flags, text), expected in zip(cases, node_replace(cases), strict=True):
        compiled = compile_find_regex(f"/{pattern}/{flags}")
        if expected is None:  # JavaScript refuses the pattern
            assert compiled is None, (pattern, flags)
            continue
        assert compiled is not None, (pattern, flags)
        got = compiled.replace(text, lambda m: "<" + m.group(0) + ">")
        assert got == expected, (pattern, flags, text)
