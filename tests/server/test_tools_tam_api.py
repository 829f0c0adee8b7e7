"""``POST /api/tools/tam`` (seed 003 §12.2): tool calls sent as text run through the real
app under the global policy and are audited as the ``api`` caller."""

from __future__ import annotations

import httpx

START = "<|[REQUEST_TOOL]|>"
END = "<|[END_TOOL]|>"


def block(*lines: str) -> str:
    return "\n".join([START, *lines, END])


def test_tool_calls_in_text_run_in_order_and_are_audited(client: httpx.Client) -> None:
    text = "\n".join(
        [
            "Before.",
            block("command:「始」chat:RollDice「末」", "notation:「始」2d6「末」"),
            block(
                "command1:「始」chat:RollDice「末」",
                "notation1:「始」12「末」",
                "command2:「始」system:get_current_time「末」",
            ),
            "After.",
        ]
    )
    response = client.post("/api/tools/tam", json={"text": text})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["text"] == "Before.\nAfter."
    roll, bad, skipped = body["results"]
    assert roll["tool"] == "chat:RollDice" and roll["ok"]
    assert roll["arguments"] == {"notation": "2d6"} and 2 <= roll["result"]["total"] <= 12
    assert not bad["ok"] and "needs at least one die" in bad["error"]
    assert skipped["tool"] == "system:get_current_time" and skipped["decision"] == "skipped"
    assert "<|[TOOL_RESULT]|>" in body["feedback"]
    entries = client.get("/api/tools/audit").json()["entries"]
    assert [(e["tool"], e["caller"]["kind"], e["caller"]["name"]) for e in entries] == [
        ("chat:RollDice", "api", "tam-endpoint"),
        ("chat:RollDice", "api", "tam-endpoint"),
    ]


def test_the_global_policy_denies_text_calls_too(client: httpx.Client) -> None:
    policy = {"rules": [{"tool": "chat:*", "action": "deny"}], "default": "allow"}
    assert client.put("/api/tools/policy", json=policy).status_code == 200
    text = block("command:「始」chat:RollDice「末」", "notation:「始」d6「末」")
    body = client.post("/api/tools/tam", json={"text": text}).json()
    (denied,) = body["results"]
    assert denied["decision"] == "denied" and not denied["ok"] and denied["result"] is None
    assert "status:「始」denied「末」" in body["feedback"]


def test_a_broken_block_runs_nothing_and_is_reported(client: httpx.Client) -> None:
    text = f"{START}\ncommand:「始」chat:RollDice\n{END}"
    body = client.post("/api/tools/tam", json={"text": text}).json()
    assert body["results"] == [] and body["problems"] and body["text"] == text
    assert client.post("/api/tools/tam", json={}).status_code == 422
