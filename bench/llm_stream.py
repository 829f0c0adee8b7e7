"""How much does ``ChatClient.stream`` cost over the bare minimum of reading an SSE stream?

Starts the replay server (in its own process, so it does not share our GIL) answering
with 2,000 chunks sent in one burst (so the client's per-chunk work, not the server's
syscalls, is what gets timed), then times, interleaved and repeated, (a) a raw ``httpx.AsyncClient``
loop that reads SSE lines and ``json.loads`` each chunk, and (b) storyloom's
``ChatClient.stream``. Prints medians and ends with ``ratio: <storyloom_ms / baseline_ms>``.

    .venv/bin/python bench/llm_stream.py [--chunks 2000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import httpx

from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient

MODEL = "test-model"
MESSAGES = [{"role": "user", "content": "Tell me a long story."}]


def start_server(text: str, chunks: int, burst: bool) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "storyloom.testing.replay_server", "--port", "0",
        "--model", MODEL, "--reply", text, "--chunks", str(chunks),
    ]  # fmt: skip
    if burst:
        command.append("--burst")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("replay LLM server at "):
        process.kill()
        raise RuntimeError(f"replay server did not start: {line!r}")
    return process, line.rsplit(" ", 1)[-1].strip()


async def baseline(client: httpx.AsyncClient, url: str) -> str:
    """The least a client can do: POST, read lines, parse each data line, keep the text."""
    body = {"model": MODEL, "messages": MESSAGES, "stream": True}
    deltas: list[str] = []
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                continue  # read on to the end of the body so the connection is reused
            choices = json.loads(data)["choices"]
            if choices:
                content = choices[0]["delta"].get("content")
                if content:
                    deltas.append(content)
    return "".join(deltas)


async def storyloom(client: ChatClient) -> str:
    async with client.stream(MESSAGES) as stream:
        async for _ in stream:
            pass
    return stream.text


async def measure(repeat: int, url: str, expected: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"baseline (httpx + json)": [], "storyloom ChatClient": []}
    async with (
        httpx.AsyncClient(timeout=60) as raw,
        ChatClient(ChatEndpoint(base_url=url, model=MODEL, timeout_s=60)) as chat,
    ):
        runs: list[tuple[str, Callable[[], Awaitable[str]]]] = [
            ("baseline (httpx + json)", lambda: baseline(raw, url)),
            ("storyloom ChatClient", lambda: storyloom(chat)),
        ]
        for _, run in runs:  # warm-up: connections, imports, first-call caches
            if await run() != expected:
                raise RuntimeError("a client received different text than the server sent")
        for _ in range(repeat):
            for name, run in runs:
                started = time.perf_counter()
                text = await run()
                times[name].append((time.perf_counter() - started) * 1000)
                if text != expected:
                    raise RuntimeError(f"{name} received different text than the server sent")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--per-chunk-writes",
        action="store_true",
        help="server writes each chunk separately (then its syscalls dominate the timing)",
    )
    args = parser.parse_args()
    text = "".join(f"w{i % 1000:03d} " for i in range(args.chunks))
    process, url = start_server(text, args.chunks, burst=not args.per_chunk_writes)
    try:
        times = asyncio.run(measure(args.repeat, url, text))
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    medians = {name: statistics.median(values) for name, values in times.items()}
    base_ms = medians["baseline (httpx + json)"]
    print(f"{args.chunks} chunks per reply, {args.repeat} runs each, medians")
    print(f"{'client':<26}{'ms':>9}{'chunks/s':>12}{'us/chunk':>10}{'overhead us/chunk':>19}")
    for name, ms in medians.items():
        per_chunk_us = ms * 1000 / args.chunks
        overhead_us = (ms - base_ms) * 1000 / args.chunks
        rate = args.chunks / (ms / 1000)
        print(f"{name:<26}{ms:>9.1f}{rate:>12,.0f}{per_chunk_us:>10.1f}{overhead_us:>19.1f}")
    print(f"ratio: {medians['storyloom ChatClient'] / base_ms:.3f}")


if __name__ == "__main__":
    main()
