"""The replay server itself: what it sends on the wire, as other suites rely on it."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys

import httpx

from storyloom.testing.replay_server import ReplayLLMServer, Reply, fake_embedding


def _events(body: str) -> list[str]:
    return [line[6:] for line in body.splitlines() if line.startswith("data: ")]


def test_stream_is_openai_chunk_format_ending_in_done() -> None:
    with ReplayLLMServer() as llm:
        llm.script(Reply(text="Hi there"))
        body = {"model": "test-model", "messages": [], "stream": True}
        response = httpx.post(f"{llm.url}/chat/completions", json=body)
    assert response.headers["content-type"] == "text/event-stream"
    events = _events(response.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert content == "Hi there"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_usage_chunk_only_when_asked() -> None:
    with ReplayLLMServer() as llm:
        body = {"model": "test-model", "messages": [], "stream": True}
        plain = _events(httpx.post(f"{llm.url}/chat/completions", json=body).text)
        body["stream_options"] = {"include_usage": True}
        with_usage = _events(httpx.post(f"{llm.url}/chat/completions", json=body).text)
    assert not any('"usage"' in e for e in plain)
    assert json.loads(with_usage[-2])["usage"]["total_tokens"] > 0


def test_chunks_splits_text_evenly() -> None:
    assert Reply(text="abcdef", chunks=3).pieces() == ["ab", "cd", "ef"]
    assert "".join(Reply(text="x" * 10, chunks=2000).pieces()) == "x" * 10
    assert len(Reply(text="x" * 10, chunks=2000).pieces()) == 2000
    assert Reply(text="one two  three").pieces() == ["one ", "two  ", "three"]


def test_error_reply_has_openai_error_body_and_retry_after() -> None:
    with ReplayLLMServer() as llm:
        llm.script(Reply(status=429, retry_after=2))
        response = httpx.post(f"{llm.url}/chat/completions", json={"model": "test-model"})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


def test_unknown_model_is_404_model_not_found() -> None:
    with ReplayLLMServer(models=["a"]) as llm:
        response = httpx.post(f"{llm.url}/chat/completions", json={"model": "b", "messages": []})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"


def test_missing_key_is_401_when_a_key_is_required() -> None:
    with ReplayLLMServer(api_key="k") as llm:
        assert httpx.get(f"{llm.url}/models").status_code == 401
        ok = httpx.get(f"{llm.url}/models", headers={"Authorization": "Bearer k"})
    assert ok.status_code == 200
    assert [m["id"] for m in ok.json()["data"]] == ["test-model"]


def test_embeddings_are_deterministic_floats_or_base64() -> None:
    with ReplayLLMServer(embedding_dim=4) as llm:
        body = {"model": "test-model", "input": ["a", "b"]}
        floats = httpx.post(f"{llm.url}/embeddings", json=body).json()
        packed = httpx.post(f"{llm.url}/embeddings", json={**body, "encoding_format": "base64"})
    assert [d["embedding"] for d in floats["data"]] == [
        fake_embedding("a", 4),
        fake_embedding("b", 4),
    ]
    raw = base64.b64decode(packed.json()["data"][0]["embedding"])
    assert list(struct.unpack("<4f", raw)) == [
        struct.unpack("<f", struct.pack("<f", v))[0] for v in fake_embedding("a", 4)
    ]


def test_requests_are_recorded_with_path_and_body() -> None:
    with ReplayLLMServer() as llm:
        httpx.get(f"{llm.url}/models")
        httpx.post(f"{llm.url}/chat/completions", json={"model": "test-model", "messages": []})
    first, second = llm.requests
    assert (first.method, first.path, dict(first)) == ("GET", "/v1/models", {})
    assert (second.method, second.path) == ("POST", "/v1/chat/completions")
    assert second["model"] == "test-model"
    assert llm.chat_requests == [second]


def test_command_line_serves_until_stopped() -> None:
    command = [
        sys.executable,
        "-m",
        "storyloom.testing.replay_server",
        "--port",
        "0",
        "--reply",
        "Hi!",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().split()[-1]
            body = {"model": "test-model", "messages": []}
            answer = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
        finally:
            process.terminate()
    assert answer["choices"][0]["message"]["content"] == "Hi!"
