"""The workflow file: round trips keep what they do not know, bad files say where."""

import json
from pathlib import Path

import pytest

from storyloom.core.errors import FileFormatError
from storyloom.workflow.workflow_file import Workflow, WorkflowLibrary, parse_workflow

FILE = {
    "id": "story",
    "name": "Story",
    "futureField": {"kept": True},
    "nodes": [
        {
            "id": "t",
            "type": "core:TextInput",
            "config": {"text": "hi"},
            "position": {"x": 10, "y": 20},
            "color": "#fff",
        }
    ],
    "edges": [
        {"source": "t", "sourceSlot": "text", "target": "t2", "targetSlot": "x", "style": "dash"}
    ],
    "interfaceInputs": {"topic": {"dataFlowType": "STRING", "required": True, "hint": 1}},
}


def test_save_and_load_keep_unknown_fields_of_file_nodes_and_edges(tmp_path: Path) -> None:
    library = WorkflowLibrary(tmp_path)
    library.save(parse_workflow(FILE))
    saved = json.loads((tmp_path / "workflows" / "story.json").read_text())
    assert saved["futureField"] == {"kept": True}
    assert saved["nodes"][0]["color"] == "#fff"
    assert saved["edges"][0]["style"] == "dash"
    assert saved["interfaceInputs"]["topic"]["hint"] == 1
    assert library.load("story").to_json() == saved
    assert [p.name for p in (tmp_path / "workflows").iterdir()] == ["story.json"]


def test_a_bad_file_names_every_field_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "workflows" / "bad.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"id": "bad", "nodes": [{"id": "", "type": 3}], "edges": [{}]}))
    with pytest.raises(FileFormatError) as caught:
        WorkflowLibrary(tmp_path).load("bad")
    fields = {p.field for p in caught.value.problems}
    assert {"nodes[0].id", "nodes[0].type", "edges[0].source", "edges[0].sourceSlot"} <= fields
    assert str(path) in str(caught.value)


def test_the_file_name_is_the_id(tmp_path: Path) -> None:
    library = WorkflowLibrary(tmp_path)
    library.save(Workflow(id="renamed"))
    (tmp_path / "workflows" / "renamed.json").rename(tmp_path / "workflows" / "moved.json")
    assert library.load("moved").id == "moved"


@pytest.mark.parametrize("bad_id", ["schema", "node-types", "validate", "../up", ".hidden", ""])
def test_ids_that_are_routes_or_not_file_names_are_refused(bad_id: str) -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_workflow({"id": bad_id})
    assert caught.value.problems[0].field == "id"


@pytest.mark.parametrize("bad_id", ["x\n", "x\r\n", "\nx", "x\n.json"])
def test_an_id_with_a_newline_is_refused_and_nothing_is_written(
    tmp_path: Path, bad_id: str
) -> None:
    # `$` also matches before a final newline; the id must match whole.
    with pytest.raises(FileFormatError) as caught:
        parse_workflow({"id": bad_id})
    assert caught.value.problems[0].field == "id"
    library = WorkflowLibrary(tmp_path)
    with pytest.raises(FileFormatError):
        library.save(Workflow.model_construct(id=bad_id))
    with pytest.raises(FileFormatError):
        library.path(bad_id)
    assert not library.exists(bad_id)
    assert not (tmp_path / "workflows").exists() or not any((tmp_path / "workflows").iterdir())


def test_listing_reports_broken_files_beside_the_good_ones(tmp_path: Path) -> None:
    library = WorkflowLibrary(tmp_path)
    library.save(Workflow(id="good", nodes=[]))
    (tmp_path / "workflows" / "broken.json").write_text("{not json")
    summaries, broken = library.list()
    assert [s.id for s in summaries] == ["good"]
    assert len(broken) == 1 and broken[0].path.name == "broken.json"
    assert "not JSON" in str(broken[0])
