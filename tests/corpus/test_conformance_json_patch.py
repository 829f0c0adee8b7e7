"""The community JSON Patch suite (RFC 6902), run through the state-update path.

A model's ``<state_update>`` block may hold an RFC 6902 array; it is decoded
(:func:`~storyloom.chat.reply.update_blocks.decode_state_update`) and applied to the chat
variables (:func:`~storyloom.chat.reply.state_ops.apply_ops`). The suite's files are
data kept outside the repository, in the conformance folder: ``$STORYLOOM_CONFORMANCE``,
else ``../shared/conformance`` beside the checkout. Each case is one test.

Chat variables are always an object, so cases whose document is not an object do not
apply; those and the other exclusions are listed, with their reasons, in
:data:`NOT_APPLICABLE`. Where the suite expects an error, storyloom reports a problem and
applies nothing of the failing operation (the state-update path skips a bad operation and
keeps the others, where RFC 6902 would drop the whole patch).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.reply.state_ops import apply_ops
from storyloom.chat.reply.update_blocks import decode_state_update

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(
    os.environ.get("STORYLOOM_CONFORMANCE") or REPO.parent / "shared" / "conformance"
)
SUITES = ("json-patch-tests.json", "json-patch-spec_tests.json")

NOT_APPLICABLE: dict[str, str] = {
    "replace object document with array document?": (
        "chat variables are always an object: a patch that turns them into an array is "
        "refused with a problem"
    ),
}
"""A case's ``comment`` → why storyloom does not run it."""


def _suite_file(name: str) -> Path | None:
    for candidate in (CONFORMANCE / "vendor" / name, CONFORMANCE / name):
        if candidate.is_file():
            return candidate
    return None


def _cases() -> list[Any]:
    params = []
    for name in SUITES:
        found = _suite_file(name)
        if found is None:
            missing = f"{name} is not in the conformance folder {CONFORMANCE}"
            params.append(pytest.param(None, id=name, marks=pytest.mark.skip(reason=missing)))
            continue
        for number, case in enumerate(json.loads(found.read_text(encoding="utf-8"))):
            comment = case.get("comment") or ""
            case_id = f"{name}[{number}] {comment}".strip()
            reason: str | None = None
            if case.get("disabled"):
                reason = "disabled in the suite itself"
            elif not isinstance(case.get("doc"), dict):
                reason = "not applicable: the document is not an object, chat variables are"
            elif comment in NOT_APPLICABLE:
                reason = f"not applicable: {NOT_APPLICABLE[comment]}"
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            params.append(pytest.param(case, id=case_id, marks=marks))
    return params


@pytest.mark.parametrize("case", _cases())
def test_json_patch_suite_case_through_the_state_update_path(case: dict[str, Any]) -> None:
    doc = case["doc"]
    before = copy.deepcopy(doc)
    ops, problems = decode_state_update(json.dumps(case["patch"], ensure_ascii=False))
    outcome = apply_ops(doc, ops)
    problems = problems + outcome.problems
    assert doc == before, "the caller's variables are never changed in place"
    if "error" in case:
        assert problems, f"expected an error: {case['error']}"
        return
    assert problems == []
    if "expected" in case:
        assert outcome.variables == case["expected"]
