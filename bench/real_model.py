"""A real model through storyloom vs straight to the same llama.cpp server, in one run.

Starts the embedded model (SmolLM2-135M on xllamacpp, 2,048 context, one thread) once and
measures, interleaved and repeated:

1. **Client overhead.** The same request (temperature 0, fixed seed, 48 tokens), streamed
   (a) with a bare ``httpx`` SSE loop and (b) with storyloom's ``ChatClient``: time to the
   first token and tokens per second. ``ratio:`` is storyloom's time to first token over
   the bare loop's.
2. **The whole user path.** A storyloom server (its user model pointed at the same
   llama.cpp) gets ``POST /api/chats/{id}/messages`` and the reply is polled until
   complete, vs the bare loop sending that turn's exact messages (read back from the
   prompt inspector), both with llama.cpp's prompt cache off. Both do the same model work,
   so the difference is what storyloom adds: snapshot, lore scan, prompt building,
   budget, parsing, storage, and the polling that finds the reply done.
3. **Filament compliance.** Scripted turns that call for a state update (picking things
   up, moving, getting hurt), each in a chat with the format guide on and one with it off:
   how many replies changed the chat's variables, and how many had a thought.
4. **Agent JSON that validates.** Curation's extraction (its system prompt and pydantic
   model) asked of short passages of public-domain prose, each request once with the
   model's json_schema as ``response_format`` (llama.cpp's grammar) and once with the
   prompt's words only, one answer each (no retry): how many validate. ``ratio:`` is the
   valid answers with the schema over those without.
5. **Text completion.** The same request on llama.cpp's own ``/completion``: a bare
   ``httpx`` SSE loop sending the exact ChatML prompt storyloom builds for these messages,
   vs ``ChatClient`` on an ``api: llamacpp`` connection (template, stop strings, its SSE
   reading). ``ratio:`` is storyloom's time to first token over the bare loop's.

    .venv/bin/python bench/real_model.py [--repeat 5] [--turns 20] [--json-requests 50]
        [--only client|path|filament|json|text]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from storyloom.core.settings import ChatEndpoint, LocalModelSettings
from storyloom.llm.chat import ChatClient
from storyloom.llm.errors import JsonAnswerError
from storyloom.llm.instruct import TemplateLibrary, messages_prompt
from storyloom.llm.local_model import LocalModelServer
from storyloom.llm.structured_output import parse_json_answer, response_format
from storyloom.project.project_file import init_project
from storyloom.server.app import create_app
from storyloom.testing.loopback import serve_in_thread
from storyloom.writing.curation import EXTRACT_SYSTEM, AgentExtraction

MESSAGES = [
    {"role": "system", "content": "You are Maren, who keeps a lighthouse."},
    {"role": "user", "content": "Tell me about the storm last night."},
]
SAMPLING = {"temperature": 0, "seed": 5, "max_tokens": 48, "cache_prompt": False}
"""``cache_prompt`` off: the bare request re-sends what storyloom just sent, and llama.cpp's
prompt cache would otherwise spare it the prompt's evaluation."""
CARD = {
    "name": "Maren",
    "description": "Maren keeps the Lanternfall lighthouse. She tracks the traveller's "
    "health, what they carry and where they are.",
    "first_mes": "*Maren hands you a mug of tea.* You are safe now. What do you need?",
}
TURNS = (
    "I pick up the brass key from the table.",
    "I climb the stairs to the lamp room.",
    "I cut my hand on the broken glass.",
    "I put the key in my pocket and take the lantern.",
    "I walk down to the cellar.",
    "I drink the healing tonic you gave me.",
    "I give you three silver coins.",
    "I drop the lantern; it goes out.",
    "I open the sea door and step onto the rocks.",
    "I find a rope and tie it to my belt.",
)


PASSAGES = (
    # Public-domain prose: Melville, Austen, Stevenson, Dickens, Conan Doyle.
    (
        "Ishmael",
        "Call me Ishmael. Having little or no money in my purse, and nothing "
        "particular to interest me on shore, I thought I would sail about a little.",
    ),
    (
        "Elizabeth",
        "Elizabeth Bennet had been obliged, by the scarcity of gentlemen, to sit "
        "down for two dances; and Mr. Darcy had been standing near enough for her to hear.",
    ),
    (
        "Jim Hawkins",
        "Jim Hawkins took the black spot from the dead captain's hand. On the "
        "other side was written: You have till ten tonight.",
    ),
    (
        "Pip",
        "Pip's sister, Mrs. Joe Gargery, was more than twenty years older than he, and "
        "had brought him up by hand. She was tall and bony and almost always wore an apron.",
    ),
    (
        "Holmes",
        "Sherlock Holmes sat silent for some minutes, with his long thin fingers "
        "pressed together. Then he rose and went to the window of the room in Baker Street.",
    ),
)
JSON_SAMPLING = {"temperature": 0.7, "max_tokens": 200, "frequency_penalty": 1,
                 "cache_prompt": False}  # fmt: skip
"""Sampled (a seed per request), so that each request is a new try at the same task; the
frequency penalty keeps a model this small from repeating one fact to ``max_tokens``."""


def extraction_prompt(chapter: int, name: str, text: str) -> str:
    """What curation sends for a chapter of a book that knows one character."""
    slug = name.lower().replace(" ", "-").replace(".", "")
    return (
        f"Chapter {chapter}. Known entities:\n- /entities/characters/{slug}: {name}\n"
        f"Facts before this chapter:\n\nThe chapter:\n{text}"
    )


async def json_validity(endpoint: ChatEndpoint, requests: int) -> tuple[int, int]:
    """(valid answers with the schema, valid answers without it) over ``requests`` each."""
    schema = response_format(AgentExtraction)
    valid = {True: 0, False: 0}
    async with ChatClient(endpoint) as client:
        for n in range(requests):
            name, text = PASSAGES[n % len(PASSAGES)]
            messages = [
                {"role": "system", "content": EXTRACT_SYSTEM},
                {"role": "user", "content": extraction_prompt(n + 1, name, text)},
            ]
            for with_schema in (True, False):
                extra: dict[str, Any] = {"response_format": schema} if with_schema else {}
                result = await client.complete(messages, seed=n, **extra)
                try:
                    parse_json_answer(result.text, AgentExtraction, what="extraction")
                except JsonAnswerError:
                    continue
                valid[with_schema] += 1
    return valid[True], valid[False]


def bare_stream(base: str, messages: list[dict[str, Any]]) -> tuple[float, int, float]:
    """(seconds to the first token, tokens, seconds in all) with nothing but httpx."""
    body = {"model": "m", "messages": messages, "stream": True, **SAMPLING}
    start = time.perf_counter()
    first = 0.0
    tokens = 0
    with (
        httpx.Client(timeout=300) as client,
        client.stream("POST", f"{base}/chat/completions", json=body) as response,
    ):
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if (choices[0].get("delta") or {}).get("content"):
                tokens += 1
                first = first or time.perf_counter() - start
    return first, tokens, time.perf_counter() - start


async def storyloom_stream(endpoint: ChatEndpoint) -> tuple[float, int, float]:
    start = time.perf_counter()
    first = 0.0
    tokens = 0
    async with ChatClient(endpoint) as client, client.stream(MESSAGES) as stream:
        async for _ in stream:
            tokens += 1
            first = first or time.perf_counter() - start
    return first, tokens, time.perf_counter() - start


def home_for(base: str, root: Path) -> Path:
    home = root / "home"
    home.mkdir()
    endpoint = {"base_url": base, "model": "smollm2", "parameters": SAMPLING, "max_retries": 0}
    (home / "settings.json").write_text(json.dumps({"user_llm": endpoint}))
    project = home / "projects" / "default"
    init_project(project)
    characters = project / "presets" / "characters"
    characters.mkdir(parents=True)
    (characters / "maren.json").write_text(json.dumps(CARD))
    return home


def new_chat(api: httpx.Client, format_guide: str) -> str:
    chat = api.post("/api/chats", json={"character_id": "maren"}).json()
    patched = api.patch(
        f"/api/chats/{chat['id']}",
        json={"settings": {"format_guide": format_guide}, "expected_version": chat["version"]},
    )
    patched.raise_for_status()
    return str(chat["id"])


def turn(api: httpx.Client, chat_id: str, text: str) -> tuple[float, dict[str, Any]]:
    """Send ``text``; (seconds until the reply is complete, the reply)."""
    start = time.perf_counter()
    api.post(f"/api/chats/{chat_id}/messages", json={"text": text}).raise_for_status()
    while True:
        view = api.get(f"/api/chats/{chat_id}").json()
        if not view["running"]:
            return time.perf_counter() - start, view["messages"][-1]
        time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument(
        "--json-requests", type=int, default=50, help="requests of section 4 (each way)"
    )
    parser.add_argument(
        "--only",
        choices=("client", "path", "filament", "json", "text"),
        help="run one section",
    )
    args = parser.parse_args()
    wanted = {args.only} if args.only else {"client", "path", "filament", "json", "text"}

    model = LocalModelServer(LocalModelSettings(context_size=2048))
    started = time.perf_counter()
    running = model.start()
    print(f"embedded model ready in {time.perf_counter() - started:.2f} s at {running.url}")
    try:
        if "client" in wanted:
            client_overhead(running.url, running.model, args.repeat)
        if wanted & {"path", "filament"}:
            through_rest(running.url, args.repeat, args.turns, wanted)
        if "json" in wanted:
            agent = ChatEndpoint(
                base_url=running.url, model=running.model, parameters=JSON_SAMPLING, max_retries=0
            )
            count = args.json_requests
            with_schema, without = asyncio.run(json_validity(agent, count))
            print(
                f"4. agent JSON that validates on {count} requests: {with_schema}/{count} with "
                f"json_schema, {without}/{count} without"
            )
            print(f"ratio: {with_schema / max(without, 1):.3f} (valid, with schema / without)")
        if "text" in wanted:
            text_overhead(running.url, running.model, args.repeat)
    finally:
        model.stop()


def race(
    bare: Callable[[], tuple[float, int, float]], endpoint: ChatEndpoint, repeat: int
) -> tuple[float, float, float, float]:
    """Median (first token, tokens/s) of the bare request and of storyloom's stream of the
    same request, taken in turns after one warming call of the bare one."""
    bare_first, ours_first, bare_rate, ours_rate = [], [], [], []
    bare()  # warm the slot and the prompt cache alike
    for _ in range(repeat):
        first, tokens, total = bare()
        bare_first.append(first)
        bare_rate.append(tokens / max(total - first, 1e-9))
        first, tokens, total = asyncio.run(storyloom_stream(endpoint))
        ours_first.append(first)
        ours_rate.append(tokens / max(total - first, 1e-9))
    med = statistics.median
    return med(bare_first), med(bare_rate), med(ours_first), med(ours_rate)


def client_overhead(base_url: str, model: str, repeat: int) -> None:
    """Section 1."""
    endpoint = ChatEndpoint(base_url=base_url, model=model, parameters=SAMPLING, max_retries=0)
    bare_first, bare_rate, ours_first, ours_rate = race(
        lambda: bare_stream(base_url, MESSAGES), endpoint, repeat
    )
    print(
        f"1. client  bare httpx: first token {bare_first * 1000:.0f} ms, {bare_rate:.1f} tokens/s"
    )
    print(
        f"   client  storyloom:  first token {ours_first * 1000:.0f} ms, {ours_rate:.1f} tokens/s"
    )
    print(f"ratio: {ours_first / bare_first:.3f} (first token, storyloom / bare)")


def bare_completion(root: str, prompt: str, stop: list[str]) -> tuple[float, int, float]:
    """(seconds to the first token, tokens, seconds in all): llama.cpp's ``/completion``
    with nothing but httpx."""
    body = {
        "prompt": prompt,
        "stream": True,
        "stop": stop,
        "n_predict": SAMPLING["max_tokens"],
        **{k: v for k, v in SAMPLING.items() if k != "max_tokens"},
    }
    start = time.perf_counter()
    first = 0.0
    tokens = 0
    with (
        httpx.Client(timeout=300) as client,
        client.stream("POST", f"{root}/completion", json=body) as response,
    ):
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            if json.loads(line[6:]).get("content"):
                tokens += 1
                first = first or time.perf_counter() - start
    return first, tokens, time.perf_counter() - start


def text_overhead(base_url: str, model: str, repeat: int) -> None:
    """Section 5."""
    endpoint = ChatEndpoint(
        base_url=base_url, model=model, parameters=SAMPLING, max_retries=0, api="llamacpp"
    )
    endpoint = TemplateLibrary(None).resolve(endpoint)
    prompt = messages_prompt(MESSAGES, endpoint)
    root = base_url.removesuffix("/v1")
    bare_first, bare_rate, ours_first, ours_rate = race(
        lambda: bare_completion(root, prompt.text, prompt.stop), endpoint, repeat
    )
    print(
        f"5. /completion  bare httpx: first token {bare_first * 1000:.0f} ms,"
        f" {bare_rate:.1f} tokens/s"
    )
    print(
        f"   /completion  storyloom (ChatML template): first token {ours_first * 1000:.0f} ms,"
        f" {ours_rate:.1f} tokens/s"
    )
    print(f"ratio: {ours_first / bare_first:.3f} (first token, storyloom / bare)")


def through_rest(base_url: str, repeat: int, turns: int, wanted: set[str]) -> None:
    """Sections 2 and 3, through a storyloom server whose user model is ``base_url``."""
    med = statistics.median
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(home_for(base_url, Path(folder)), environ={}, local_models=False)
        with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=300) as api:
            if "path" in wanted:
                path_times, bare_times = [], []
                chat_id = new_chat(api, "on")
                for text in TURNS[:repeat]:
                    seconds, reply = turn(api, chat_id, text)
                    sent = api.get(f"/api/chats/{chat_id}/messages/{reply['id']}/prompt").json()[
                        "messages"
                    ]
                    path_times.append(seconds)
                    bare_times.append(bare_stream(base_url, sent)[2])
                print(
                    f"2. a chat turn through REST: {med(path_times) * 1000:.0f} ms; the same "
                    f"messages straight to llama.cpp: {med(bare_times) * 1000:.0f} ms"
                )
                print(
                    f"ratio: {med(path_times) / med(bare_times):.3f} (whole turn, storyloom / bare)"
                )
            if "filament" in wanted:
                filament_compliance(api, turns)


def filament_compliance(api: httpx.Client, turns: int) -> None:
    """Section 3."""
    print(f"3. Filament compliance over {turns} turns:")
    for guide in ("on", "off"):
        chat_id = new_chat(api, guide)
        updated = thought = failed = 0
        for n in range(turns):
            _, reply = turn(api, chat_id, TURNS[n % len(TURNS)])
            if reply["status"] != "complete":
                failed += 1
                continue
            state = api.get(f"/api/chats/{chat_id}/messages/{reply['id']}/state").json()
            if any(op["path"].startswith("/variables") for op in state["delta"]):
                updated += 1
            if reply.get("thought"):
                thought += 1
        print(
            f"   format guide {guide:3}: {updated}/{turns} replies updated "
            f"the state, {thought} had a thought, {failed} failed"
        )


if __name__ == "__main__":
    main()
