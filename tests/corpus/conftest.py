"""The corpus: real SillyTavern files from users, kept outside the repository.

The folder is ``$STORYLOOM_CORPUS``, else ``../shared/st-samples`` beside the checkout.
``make test-corpus`` runs these tests; plain ``pytest`` leaves them out (pyproject's
``--ignore``), because a fresh clone has no corpus. A test that needs one named sample
skips when the folder is another corpus without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("STORYLOOM_CORPUS") or REPO.parent / "shared" / "st-samples")
NOT_SILLYTAVERN = {".md", ".txt"}


def sillytavern_files() -> list[Path]:
    """Every SillyTavern file of the corpus (its README and MANIFEST are not)."""
    if not CORPUS.is_dir():
        return []
    return sorted(
        p for p in CORPUS.iterdir() if p.is_file() and p.suffix.lower() not in NOT_SILLYTAVERN
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "corpus_file" in metafunc.fixturenames:
        files = sillytavern_files()
        metafunc.parametrize("corpus_file", files, ids=[p.name for p in files])
    if "corpus_chat" in metafunc.fixturenames:
        chats = [p for p in sillytavern_files() if p.suffix == ".jsonl"]
        metafunc.parametrize("corpus_chat", chats, ids=[p.name for p in chats])


@pytest.fixture
def corpus() -> Path:
    return CORPUS


@pytest.fixture
def corpus_files() -> list[Path]:
    return sillytavern_files()


@pytest.fixture
def corpus_sample() -> Callable[[str], Path]:
    """``corpus_sample(name)``: that file of the corpus; the test skips without it."""

    def find(name: str) -> Path:
        path = CORPUS / name
        if not path.is_file():
            # STORYLOOM_CORPUS may name any user's folder: a check tied to one known sample
            # applies only where it is; every file present is still checked by the other tests.
            pytest.skip(f"{name} is not in the corpus {CORPUS}")
        return path

    return find


# The browser tests' server, chromium and page (tests/browser/conftest.py), for the corpus
# cards played in the browser; `make test` builds the web app and installs both.
from tests.browser.conftest import browser, start_server, web_build  # noqa: E402, F401
