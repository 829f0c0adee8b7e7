"""The chat service end to end: SQLite turn tree, the real pipeline workflow, a real HTTP
LLM (the replay server). Nothing is faked below HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from storyloom.chat.prompt.default_pipeline import default_pipeline
from storyloom.chat.service.conversations import BUSY, ChatService, SendResult
from storyloom.chat.service.reply_run import ChatEvent, MessageAdded, StreamDelta, TurnDone
from storyloom.chat.store.conversation import ConversationSettings
from storyloom.chat.store.message import Message
from storyloom.chat.store.turn_tree import ChatError, TurnTree, VersionConflict
from storyloom.sillytavern.character import CharacterDefinition
from storyloom.store.database import Database
from storyloom.testing.replay_server import ReplayLLMServer, Reply
from storyloom.workflow.workflow_file import WorkflowLibrary
from tests.chat.conftest import running_chat_service, write_characters

MVU_CARD = (
    Path(__file__).resolve().parents[1] / "fixtures" / "sillytavern" / "card_academy_zh_v3_mvu.json"
)
WAIT_S = 10.0
"""Only a guard against a hanging test; nothing depends on how long anything takes."""

CARD: dict[str, Any] = {
    "name": "Seraphina",
    "description": "A guardian of the forest.",
    "personality": "kind",
    "first_mes": "Welcome, {{user}}. I am {{char}}.",
    "alternate_greetings": ["Oh, {{user}}! You woke up.", "Quiet, {{user}}."],
    "extensions": {
        "regex_scripts": [
            {
                "scriptName": "no shouting",
                "findRegex": "/!+/g",
                "replaceString": ".",
                "placement": [1, 2],
            }
        ]
    },
}


def replied(result: SendResult) -> Message:
    """The reply a one-to-one send always starts."""
    assert result.assistant_message is not None
    return result.assistant_message


@dataclass
class Harness:
    service: ChatService
    tree: TurnTree
    llm: ReplayLLMServer
    project: Path
    events: list[ChatEvent] = field(default_factory=list)

    def new_chat(self, **settings: Any) -> str:
        conversation = self.service.create_conversation(
            character_id="sera", settings=ConversationSettings(**settings)
        )
        return conversation.id

    def version(self, conversation_id: str) -> int:
        return self.tree.conversation(conversation_id).version

    async def finished(self, conversation_id: str) -> Message:
        message = await asyncio.wait_for(self.service.wait(conversation_id), WAIT_S)
        assert message is not None
        return message

    async def until(self, check: Callable[[], bool]) -> None:
        for _ in range(int(WAIT_S / 0.01)):
            if check():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the condition did not come true")

    def streamed(self, message_id: str) -> str:
        return "".join(
            e.text for e in self.events if isinstance(e, StreamDelta) and e.message_id == message_id
        )


@pytest.fixture
async def harness(project: Path, db: Database, llm: ReplayLLMServer) -> AsyncIterator[Harness]:
    write_characters(project, {"sera": CARD})
    events: list[ChatEvent] = []
    async with running_chat_service(project, db, llm, publish=events.append) as service:
        yield Harness(service, service.tree, llm, project, events)


# -- new conversations -------------------------------------------------------------------------


async def test_a_character_chat_opens_with_its_greetings_as_sibling_first_messages(
    harness: Harness,
) -> None:
    conversation = harness.service.create_conversation(character_id="sera", user_name="Ann")
    roots = harness.tree.children(conversation.id, None)
    assert [m.content for m in roots] == [
        "Welcome, Ann. I am Seraphina.",
        "Oh, Ann! You woke up.",
        "Quiet, Ann.",
    ]
    assert {m.role for m in roots} == {"assistant"}
    assert conversation.pointer == roots[0].id
    assert [m.id for m in harness.tree.active_path(conversation.id)] == [roots[0].id]
    assert conversation.character.card["name"] == "Seraphina"
    assert conversation.settings.user_name == "Ann"


async def test_a_story_outline_puts_the_first_plot_point_in_the_root_state(
    harness: Harness,
) -> None:
    backgrounds = harness.project / "presets" / "backgrounds"
    backgrounds.mkdir(parents=True)
    outline = [{"index": 1, "content": "They meet."}, {"index": 2, "content": "They leave."}]
    (backgrounds / "quest.json").write_text(
        json.dumps({"name": "Quest", "story_outline": outline}), encoding="utf-8"
    )
    conversation = harness.service.create_conversation(character_id="sera", background_id="quest")
    plot = harness.tree.state_at(conversation.pointer).plot
    assert plot is not None and plot.current_plot_index == 1
    # A reply that reaches the point moves the plot on (the director, per branch).
    harness.llm.script(Reply(text="You meet a stranger. [PROGRESS]"))
    await harness.service.send(conversation.id, "Hello", expected_version=None)
    reply = await harness.finished(conversation.id)
    assert reply.status == "complete"
    assert "[PROGRESS]" not in reply.content
    advanced = harness.tree.state_at(reply.id).plot
    assert advanced is not None and advanced.current_plot_index == 2
    assert harness.tree.state_at(conversation.pointer).plot == plot


# -- a turn --------------------------------------------------------------------------------


async def test_send_saves_the_users_message_first_and_streams_the_reply(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(
        Reply(text="<thought>She smiles.</thought>Hello there, traveller.", chunks=6)
    )
    result = await harness.service.send(cid, "Hi", expected_version=harness.version(cid))
    # Saved before the model answered; the reply's message exists, streaming.
    assert harness.tree.message(result.user_message.id).content == "Hi"
    assert replied(result).status == "streaming"
    assert replied(result).parent_id == result.user_message.id
    assert result.version == harness.version(cid)
    reply = await harness.finished(cid)
    assert reply.id == replied(result).id
    assert reply.status == "complete" and reply.error is None
    assert reply.content == "Hello there, traveller."
    assert reply.thought == "She smiles."
    assert harness.tree.conversation(cid).pointer == reply.id
    assert harness.streamed(reply.id) == "Hello there, traveller."
    sent = harness.llm.chat_requests[-1]["messages"]
    assert sent[-1] == {"role": "user", "content": "Hi"} or sent[-1]["content"].endswith("Hi")
    record = harness.tree.turn_record(reply.id)
    prompt = record.prompt
    assert prompt is not None
    assert prompt["blocks"] and all("tokens" in b for b in prompt["blocks"])
    assert prompt["messages"]
    assert record.raw is not None and record.raw.startswith("<thought>")
    done = [e for e in harness.events if isinstance(e, TurnDone)]
    assert [(d.message_id, d.status) for d in done] == [(reply.id, "complete")]
    assert done[0].version == harness.version(cid)
    added = [e.message.id for e in harness.events if isinstance(e, MessageAdded)]
    assert added[-3:] == [result.user_message.id, reply.id, reply.id]


async def test_state_updates_in_the_reply_land_in_the_state_chain(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text='<state_update><set key="hp" value="7"/></state_update>Ouch.'))
    await harness.service.send(cid, "I hit you", expected_version=None)
    reply = await harness.finished(cid)
    assert reply.content == "Ouch."
    assert harness.tree.state_at(reply.id).variables == {"hp": 7}
    assert harness.tree.state_at(reply.parent_id).variables == {}


async def test_a_second_send_while_a_reply_is_written_is_refused(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="one two three", hold_after_chunks=1))
    first = await harness.service.send(cid, "Hi", expected_version=None)
    before = harness.tree.active_path(cid)
    with pytest.raises(ChatError, match=BUSY):
        await harness.service.send(cid, "Hello?", expected_version=None)
    assert harness.tree.active_path(cid) == before  # nothing was saved
    stopped = await harness.service.stop(cid)
    assert stopped is not None and stopped.id == replied(first).id
    assert not harness.service.running(cid)


async def test_a_stale_version_saves_nothing(harness: Harness) -> None:
    cid = harness.new_chat()
    stale = harness.version(cid)
    harness.service.set_pointer(cid, harness.tree.conversation(cid).pointer, expected_version=stale)
    with pytest.raises(VersionConflict) as caught:
        await harness.service.send(cid, "Hi", expected_version=stale)
    assert caught.value.actual == harness.version(cid)
    assert [m.role for m in harness.tree.active_path(cid)] == ["assistant"]
    assert harness.llm.chat_requests == []


async def test_streamed_text_reaches_sqlite_before_the_reply_ends(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="The quick brown fox jumps", hold_after_chunks=3))
    result = await harness.service.send(cid, "Go", expected_version=None)
    mid = replied(result).id
    await harness.until(lambda: harness.tree.message(mid).content != "")
    stored = harness.tree.message(mid)
    assert stored.status == "streaming"
    assert "The quick brown".startswith(stored.content.strip())
    raw = harness.tree.turn_record(mid).raw
    assert raw is not None and raw.startswith(stored.content.strip())
    await harness.service.stop(cid)


async def test_stop_keeps_the_partial_reply_marked(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="The quick brown fox jumps", hold_after_chunks=3))
    result = await harness.service.send(cid, "Go", expected_version=None)
    mid = replied(result).id
    await harness.until(lambda: harness.streamed(mid).strip() == "The quick brown")
    stopped = await harness.service.stop(cid)
    assert stopped is not None
    assert stopped.status == "partial" and stopped.error == "stopped"
    assert stopped.content == "The quick brown"
    assert harness.tree.message(mid) == stopped
    assert harness.tree.conversation(cid).pointer == mid
    done = [e for e in harness.events if isinstance(e, TurnDone)]
    assert done[-1].status == "partial" and done[-1].error == "stopped"


async def test_a_failed_reply_keeps_the_users_message_and_retry_makes_a_sibling(
    harness: Harness,
) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(status=500, error_message="the model is down"))
    result = await harness.service.send(cid, "Hello?", expected_version=None)
    failed = await harness.finished(cid)
    assert failed.status == "error" and failed.content == ""
    assert failed.error is not None and "the model is down" in failed.error
    assert harness.tree.message(result.user_message.id).content == "Hello?"
    harness.llm.script(Reply(text="Sorry, I was away."))
    retry = await harness.service.generate(
        cid, kind="swipe", message_id=failed.id, expected_version=harness.version(cid)
    )
    assert retry.parent_id == result.user_message.id and retry.sibling_index == 1
    done = await harness.finished(cid)
    assert done.content == "Sorry, I was away." and done.status == "complete"
    assert [m.id for m in harness.tree.siblings(failed.id)] == [failed.id, done.id]
    assert harness.tree.message(failed.id).status == "error"  # kept, a swipe away


async def test_a_stream_cut_midway_keeps_the_text_that_arrived(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="It was a dark and stormy night", cut_after_chunks=3))
    await harness.service.send(cid, "Tell me a story", expected_version=None)
    cut = await harness.finished(cid)
    assert cut.status == "partial"
    assert cut.content == "It was a"
    assert cut.error


async def test_a_swipe_is_a_new_sibling_and_the_old_reply_stays(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="First answer."), Reply(text="Second answer."))
    await harness.service.send(cid, "Hi", expected_version=None)
    first = await harness.finished(cid)
    await harness.service.generate(cid, kind="swipe")
    second = await harness.finished(cid)
    assert second.parent_id == first.parent_id and second.sibling_index == 1
    assert harness.tree.conversation(cid).pointer == second.id
    harness.service.swipe(cid, second.id, 0, expected_version=None)
    assert harness.tree.conversation(cid).pointer == first.id
    assert harness.tree.message(first.id).content == "First answer."
    # Both prompts were the same: a swipe answers the same question again.
    one, two = harness.llm.chat_requests[-2:]
    assert one["messages"] == two["messages"]


async def test_continue_appends_to_the_reply(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="Once upon a time,"), Reply(text=" there was a fox."))
    await harness.service.send(cid, "A story?", expected_version=None)
    first = await harness.finished(cid)
    started = await harness.service.generate(cid, kind="continue")
    assert started.id == first.id and started.status == "streaming"
    more = await harness.finished(cid)
    assert more.id == first.id
    assert more.content == "Once upon a time, there was a fox."
    assert more.status == "complete"
    # The model was shown the reply so far, as the last message, to go on from.
    sent = harness.llm.chat_requests[-1]["messages"]
    assert any("Once upon a time," in str(m.get("content")) for m in sent)


async def test_allowed_regex_scripts_rewrite_stored_text_and_keep_the_original(
    harness: Harness,
) -> None:
    cid = harness.new_chat(allow_regex_scripts=True)
    harness.llm.script(Reply(text="Welcome back!!"))
    result = await harness.service.send(cid, "Hello!!!", expected_version=None)
    assert result.user_message.content == "Hello."
    assert result.user_message.original == "Hello!!!"
    reply = await harness.finished(cid)
    assert reply.content == "Welcome back." and reply.original == "Welcome back!!"
    plain = harness.new_chat()
    harness.llm.script(Reply(text="Hi!"))
    kept = await harness.service.send(plain, "Hello!!!", expected_version=None)
    assert kept.user_message.content == "Hello!!!" and kept.user_message.original is None
    await harness.finished(plain)


async def test_edit_time_travel_and_delete_are_refused_while_a_reply_is_written(
    harness: Harness,
) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="one two three", hold_after_chunks=1))
    result = await harness.service.send(cid, "Hi", expected_version=None)
    with pytest.raises(ChatError, match=BUSY):
        harness.service.edit_message(cid, result.user_message.id, "Yo", expected_version=None)
    with pytest.raises(ChatError, match=BUSY):
        harness.service.set_pointer(cid, result.user_message.id, expected_version=None)
    with pytest.raises(ChatError, match=BUSY):
        harness.service.delete_message(cid, result.user_message.id, expected_version=None)
    await harness.service.stop(cid)
    edited = harness.service.edit_message(cid, result.user_message.id, "Yo", expected_version=None)
    assert edited.parent_id == result.user_message.parent_id and edited.content == "Yo"


async def test_a_missing_pipeline_fails_the_reply_and_names_the_file(harness: Harness) -> None:
    cid = harness.new_chat(pipeline="my-pipeline")
    result = await harness.service.send(cid, "Hi", expected_version=None)
    failed = await harness.finished(cid)
    assert failed.id == replied(result).id
    assert failed.status == "error" and failed.content == ""
    assert failed.error is not None and "my-pipeline.json" in failed.error
    assert harness.tree.message(result.user_message.id).content == "Hi"
    assert harness.llm.chat_requests == []


async def test_a_pipeline_of_the_users_own_streams_with_its_extra_tags_and_context(
    harness: Harness,
) -> None:
    workflow = default_pipeline()
    parser = next(n for n in workflow.nodes if n.type == "chat:FilamentParser")
    parser.config["extra_tags"] = ["status"]
    budget = next(n for n in workflow.nodes if n.type == "chat:TokenBudget")
    budget.config["max_context_tokens"] = 32768
    workflow.id = "mine"
    WorkflowLibrary(harness.project).save(workflow)
    cid = harness.new_chat(pipeline="mine")
    harness.llm.script(Reply(text="<status>hp 5</status>The door creaks."))
    await harness.service.send(cid, "Open it", expected_version=None)
    reply = await harness.finished(cid)
    assert reply.content == "The door creaks."
    # The status text never reached the page, not even while the reply streamed.
    assert harness.streamed(reply.id) == "The door creaks."


async def test_reasoning_scripts_rewrite_the_stored_thought(harness: Harness) -> None:
    presets = harness.project / "presets" / "characters"
    card = {
        **CARD,
        "name": "Vex",
        "extensions": {
            "regex_scripts": [
                {
                    "scriptName": "hide plans",
                    "findRegex": "/PLAN: .*/",
                    "replaceString": "[plan hidden]",
                    "placement": [6],
                }
            ]
        },
    }
    (presets / "vex.json").write_text(json.dumps(card), encoding="utf-8")
    conversation = harness.service.create_conversation(
        character_id="vex", settings=ConversationSettings(allow_regex_scripts=True)
    )
    harness.llm.script(Reply(text="<thought>PLAN: betray them</thought>Of course I'll help."))
    await harness.service.send(conversation.id, "Will you help?", expected_version=None)
    reply = await harness.finished(conversation.id)
    assert reply.thought == "[plan hidden]"
    assert reply.content == "Of course I'll help."


async def test_an_mvu_card_starts_from_its_initvar_and_its_json_patches_change_the_state(
    harness: Harness,
) -> None:
    card = json.loads(MVU_CARD.read_text(encoding="utf-8"))
    (harness.project / "presets" / "characters" / "ai.json").write_text(
        json.dumps(CharacterDefinition.from_card(card).model_dump(mode="json")), encoding="utf-8"
    )
    conversation = harness.service.create_conversation(character_id="ai")
    start = harness.tree.state_at(conversation.pointer).variables
    assert start["stat_data"]["阿砚"]["墨技进度"] == 0
    patch = [{"op": "replace", "path": "/阿砚/墨技进度", "value": 10}]
    harness.llm.script(
        Reply(
            text="她点了点头。\n<UpdateVariable><JSONPatch>"
            + json.dumps(patch, ensure_ascii=False)
            + "</JSONPatch></UpdateVariable>"
        )
    )
    await harness.service.send(conversation.id, "开始修炼吧。", expected_version=None)
    reply = await harness.finished(conversation.id)
    assert reply.content == "她点了点头。"
    after = harness.tree.state_at(reply.id).variables["stat_data"]
    assert after["阿砚"]["墨技进度"] == 10
    assert after["书院"]["当前地点"] == "藏书楼"


async def test_a_reply_stopped_before_any_text_can_be_retried(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="Never sent", hold_after_chunks=0), Reply(text="A second try."))
    result = await harness.service.send(cid, "Go", expected_version=None)
    await harness.until(lambda: len(harness.llm.chat_requests) == 1)
    stopped = await harness.service.stop(cid)
    assert stopped is not None and stopped.status == "error" and stopped.error == "stopped"
    await harness.service.generate(cid, kind="swipe", message_id=replied(result).id)
    retried = await harness.finished(cid)
    assert retried.status == "complete" and retried.content == "A second try."
    assert harness.tree.message(retried.id).parent_id == result.user_message.id


async def test_a_reply_stopped_before_the_model_is_asked_never_asks_it(harness: Harness) -> None:
    cid = harness.new_chat()
    harness.llm.script(Reply(text="Only the retry asks for this."))
    result = await harness.service.send(cid, "Go", expected_version=None)
    stopped = await harness.service.stop(cid)
    assert stopped is not None and stopped.status == "error" and stopped.error == "stopped"
    assert harness.llm.chat_requests == []
    await harness.service.generate(cid, kind="swipe", message_id=replied(result).id)
    retried = await harness.finished(cid)
    assert retried.status == "complete" and retried.content == "Only the retry asks for this."
