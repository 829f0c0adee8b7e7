"""SillyTavern's MacroEngine end-to-end cases, run through storyloom's macro engine.

The cases are data from a public suite (``st_macros_cases.json``: macro text, the local
and global variables set first, the expected output), kept outside the repository in the
conformance folder: ``$STORYLOOM_CONFORMANCE``, else ``../shared/conformance`` beside the
checkout. Each case is one test. A case the suite could not turn into data (it drives
SillyTavern's JavaScript API: registering macros, pre/post processors) skips with the
suite's own reason; storyloom's own exclusions are listed in :data:`NOT_APPLICABLE`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.prompt.macros import MacroContext, expand_macros

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(
    os.environ.get("STORYLOOM_CONFORMANCE") or REPO.parent / "shared" / "conformance"
)
SUITE = "st_macros_cases.json"

NOT_APPLICABLE: dict[str, str] = {}
"""Case id → why storyloom does not run it (features it deliberately lacks)."""


def _suite_file() -> Path | None:
    for candidate in (CONFORMANCE / "vendor" / SUITE, CONFORMANCE / SUITE):
        if candidate.is_file():
            return candidate
    return None


def _cases() -> list[Any]:
    found = _suite_file()
    if found is None:
        reason = f"{SUITE} is not in the conformance folder {CONFORMANCE}"
        return [pytest.param(None, id="missing", marks=pytest.mark.skip(reason=reason))]
    cases = json.loads(found.read_text(encoding="utf-8"))["cases"]
    params = []
    for case in cases:
        marks = []
        if not case["convertible"]:
            marks.append(pytest.mark.skip(reason=f"not applicable: {case['reason']}"))
        elif case["id"] in NOT_APPLICABLE:
            marks.append(pytest.mark.skip(reason=NOT_APPLICABLE[case["id"]]))
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


def _run(case: dict[str, Any]) -> list[str]:
    """Every call of the case in order, on one set of local and global variables."""
    env = case["env"]
    local: dict[str, Any] = {}
    global_: dict[str, Any] = {}
    outputs = []
    for call in case["calls"]:
        given = call.get("variables") or {}
        local.update(given.get("local") or {})
        global_.update(given.get("global") or {})
        ctx = MacroContext(
            char=env["char"], user=env["user"], variables=local, global_variables=global_
        )
        outputs.append(expand_macros(call["input"], ctx))
    return outputs


@pytest.mark.parametrize("case", _cases())
def test_sillytavern_macro_engine_case(case: dict[str, Any]) -> None:
    outputs = _run(case)
    checked = 0
    for assertion in case["assertions"]:
        if "call" not in assertion:
            continue  # about SillyTavern's log (warnings, errors), not the output
        got = outputs[assertion["call"]]
        expected = (
            outputs[assertion["expected_call"]]
            if "expected_call" in assertion
            else assertion["expected"]
        )
        if assertion["matcher"] == "toBe":
            assert got == expected, f"input {case['calls'][assertion['call']]['input']!r}"
        elif assertion["matcher"] == "not.toBe":
            assert got != expected
        else:
            pytest.fail(f"unknown matcher {assertion['matcher']}")
        checked += 1
    assert checked, "the case checks no output"
