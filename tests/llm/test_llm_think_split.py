"""``<think>…</think>`` in the content (DeepSeek-R1, Qwen3 and their distills on servers
that leave it there) is reasoning: it streams into ``reasoning_text``, never into the
reply, however the tags fall across chunks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storyloom.llm.chat import ChatClient
from storyloom.llm.think_split import ThinkSplitter, split_think
from storyloom.testing.replay_server import ReplayLLMServer, Reply

ANSWER = "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello, traveller."


@pytest.mark.parametrize("chunks", [1, 3, 7, 40, len(ANSWER)])
async def test_a_streamed_think_block_goes_to_the_reasoning_in_any_chunking(
    llm: ReplayLLMServer, client: ChatClient, chunks: int
) -> None:
    llm.script(Reply(text=ANSWER, chunks=chunks))
    deltas: list[str] = []
    async with client.stream([{"role": "user", "content": "Hi"}]) as stream:
        async for delta in stream:
            deltas.append(delta)
    assert stream.text == "Hello, traveller." == "".join(deltas)
    assert stream.reasoning_text.strip() == "The user greets me. I should greet back."


async def test_a_reply_that_only_mentions_think_later_is_left_alone(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    text = "I write <think> tags in my notes, like <think>this</think>."
    llm.script(Reply(text=text, chunks=9))
    result = await client.stream([{"role": "user", "content": "Hi"}]).collect()
    assert result.text == text and result.reasoning_text == ""


async def test_a_reply_starting_with_a_lone_angle_bracket_is_kept_whole(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="<thi", chunks=4))
    result = await client.stream([{"role": "user", "content": "Hi"}]).collect()
    assert result.text == "<thi"


async def test_a_thought_cut_off_before_it_closes_stays_reasoning(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text="<think>still weighing it </thi", chunks=6))
    result = await client.stream([{"role": "user", "content": "Hi"}]).collect()
    assert result.text == ""
    assert result.reasoning_text.startswith("still weighing it")


async def test_a_whole_answer_splits_its_think_block_too(
    llm: ReplayLLMServer, client: ChatClient
) -> None:
    llm.script(Reply(text=ANSWER))
    result = await client.complete([{"role": "user", "content": "Hi"}])
    assert result.text == "Hello, traveller."
    assert "greet back" in result.reasoning_text


@settings(max_examples=200, deadline=None)
@given(
    thought=st.text(st.characters(blacklist_characters="<>"), max_size=40),
    reply=st.text(max_size=40).filter(lambda r: not r.lstrip().startswith("<think>")),
    cuts=st.lists(st.integers(min_value=1, max_value=120), max_size=8),
)
def test_splitting_by_chunks_agrees_with_splitting_the_whole(
    thought: str, reply: str, cuts: list[int]
) -> None:
    text = f"<think>{thought}</think>{reply}"
    splitter = ThinkSplitter()
    out: list[str] = []
    start = 0
    for cut in sorted(set(cuts)):
        if cut > start:
            out.append(splitter.feed(text[start:cut]))
            start = cut
    if start < len(text):
        out.append(splitter.feed(text[start:]))
    out.append(splitter.flush())
    reasoning, expected = split_think(text)
    assert splitter.reasoning == reasoning == thought
    assert "".join(out) == expected


@pytest.mark.parametrize("chunks", [1, 4, 33])
async def test_a_connection_s_own_reasoning_tags_split_the_answer_streamed_and_whole(
    llm: ReplayLLMServer, client: ChatClient, chunks: int
) -> None:
    """A model that writes ``<thinking>…</thinking>`` (set as the connection's reasoning
    prefix and suffix, as SillyTavern's Reasoning Formatting) is split the same way; the
    default tags are then plain text."""
    endpoint = client.endpoint.model_copy(
        update={"reasoning_prefix": "<thinking>\n", "reasoning_suffix": "\n</thinking>"}
    )
    answer = "<thinking>\nShe is cold. Offer tea.\n</thinking>\nHere, drink this <think>."
    messages = [{"role": "user", "content": "Hi"}]
    async with ChatClient(endpoint) as own:
        llm.script(Reply(text=answer, chunks=chunks))
        streamed = await own.stream(messages).collect()
        llm.script(Reply(text=answer))
        whole = await own.complete(messages)
    for result in (streamed, whole):
        assert result.text == "Here, drink this <think>."
        assert result.reasoning_text.strip() == "She is cold. Offer tea."
    llm.script(Reply(text=answer, chunks=chunks))
    plain = await client.stream(messages).collect()
    assert plain.text == answer and plain.reasoning_text == ""
