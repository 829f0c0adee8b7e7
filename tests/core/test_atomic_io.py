import os
import stat
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


def test_a_given_mode_replaces_the_old_files_and_otherwise_it_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    os.chmod(target, 0o644)
    atomic_write_text(target, "kept mode")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    atomic_write_text(target, "secret", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    fresh = tmp_path / "new.json"
    atomic_write_text(fresh, "new")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
