import os
from pathlib import Path

import pytest

from storyloom.core.atomic_io import atomic_write_json, atomic_write_text


def test_write_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.json"
    atomic_write_json(target, {"name": "塞拉菲娜"})
    atomic_write_text(target, "second")
    assert target.read_text() == "second"
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]


def test_failed_write_keeps_old_content(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    with pytest.raises(TypeError):
        atomic_write_json(target, {"bad": object()})
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.json"]
