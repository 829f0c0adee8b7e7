"""Attacks on what the kernel shares with the sandbox: keyrings, memory a per-process limit
does not count, the mount table, and the report the runner hands back.

Each one ran successfully against the sandbox before its wall existed (the keyring canary
was read and written, three 400 MB processes all held their memory, ``memfd`` and SysV
shared memory passed the limit, the mount table named the checkout, ``site-packages``
could be listed, a forged report crashed the call).
"""

from __future__ import annotations

import ctypes
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import storyloom
from storyloom.sandbox import SandboxLimits, sandbox_status
from storyloom.sandbox.bwrap import base_site_packages
from storyloom.sandbox.code_interpreter import execute_code
from storyloom.sandbox.seccomp import host_arch
from tests.sandbox.sandbox_support import run_python_script

pytestmark = pytest.mark.usefixtures("sandbox_ready")

CHECKOUT = str(Path(storyloom.__file__).resolve().parent)
KEY_SPEC_SESSION_KEYRING = -3
KEY_SPEC_USER_KEYRING = -4
KEYCTL_REVOKE = 3
KEYCTL_SEARCH = 10
KEYCTL_READ = 11

# What the attacker runs: find the canary in the keyrings storyloom's user has, read it,
# and plant a key of its own there.
KEYRING_ATTACK = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL, ADD_KEY = {keyctl}, {add_key}
found = {{}}
for ring in (-3, -4, -5):  # session, user, user-session keyrings
    key = libc.syscall(KEYCTL, 10, ring, b"user", b"{canary}", 0)
    if key > 0:
        buffer = ctypes.create_string_buffer(256)
        size = libc.syscall(KEYCTL, 11, key, buffer, 256)
        found["read"] = buffer.raw[: max(size, 0)].decode(errors="replace")
    found[f"search {{ring}}"] = ctypes.get_errno()
    planted = libc.syscall(ADD_KEY, b"user", b"{planted}", b"attacker", 8, ring)
    found[f"planted {{ring}}"] = planted
print(json.dumps(found))
"""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _host_numbers() -> tuple[int, int]:
    arch = host_arch()
    assert arch is not None, "storyloom has a seccomp filter for this architecture"
    return arch.numbers["keyctl"], arch.numbers["add_key"]


def _search(ring: int, description: str) -> int:
    keyctl, _ = _host_numbers()
    return int(_libc().syscall(keyctl, KEYCTL_SEARCH, ring, b"user", description.encode(), 0))


@pytest.fixture
def canary() -> Iterator[tuple[str, str]]:
    """A secret key in the test process's user and session keyrings, and the name a
    planted key would have; both revoked afterwards."""
    keyctl, add_key = _host_numbers()
    name = f"storyloom-canary-{uuid.uuid4().hex[:8]}"
    secret = b"the-users-secret"
    added = [
        _libc().syscall(add_key, b"user", name.encode(), secret, len(secret), ring)
        for ring in (KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING)
    ]
    if max(added) <= 0:
        pytest.fail(f"the test cannot add a key here (errno {ctypes.get_errno()})")
    planted = f"storyloom-planted-{uuid.uuid4().hex[:8]}"
    yield name, planted
    for key in [*added, *(_search(r, planted) for r in (-3, -4, -5))]:
        if key > 0:
            _libc().syscall(keyctl, KEYCTL_REVOKE, key)


def _attack(canary: tuple[str, str]) -> str:
    keyctl, add_key = _host_numbers()
    return KEYRING_ATTACK.format(
        keyctl=keyctl, add_key=add_key, canary=canary[0], planted=canary[1]
    )


def _assert_keyrings_untouched(found: dict[str, object], planted: str) -> None:
    assert "read" not in found, found
    assert all(value == -1 for key, value in found.items() if key.startswith("planted")), found
    for ring in (KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, -5):
        assert _search(ring, planted) <= 0, f"a key was planted in keyring {ring}"


async def test_code_interpreter_neither_reads_nor_writes_the_users_keyrings(
    canary: tuple[str, str],
) -> None:
    result = await execute_code("python", _attack(canary))
    assert result.error is None, (result.error, result.stderr)
    _assert_keyrings_untouched(json.loads(result.stdout.strip().splitlines()[-1]), canary[1])


async def test_a_script_tool_neither_reads_nor_writes_the_users_keyrings(
    canary: tuple[str, str], tmp_path: Path
) -> None:
    result = await run_python_script(tmp_path / "scripts", _attack(canary))
    assert result.exit_code == 0, result.stderr
    _assert_keyrings_untouched(json.loads(result.stdout.strip().splitlines()[-1]), canary[1])


async def test_proc_keys_lists_no_keyring_of_the_host(tmp_path: Path) -> None:
    code = """
    for name in ("/proc/keys", "/proc/key-users"):
        try:
            print(name, open(name).read())
        except OSError as exc:
            print(name, "refused", exc.errno)
    """
    result = await run_python_script(tmp_path / "scripts", code)
    assert "keyring" not in result.stdout and "_uid" not in result.stdout, result.stdout


async def test_io_uring_bpf_perf_and_userfaultfd_are_refused(tmp_path: Path) -> None:
    arch = host_arch()
    assert arch is not None
    calls = {
        name: arch.numbers[name]
        for name in ("io_uring_setup", "bpf", "perf_event_open", "userfaultfd", "ptrace")
    }
    code = f"""
    import ctypes, json
    libc = ctypes.CDLL(None, use_errno=True)
    found = {{}}
    for name, number in {calls!r}.items():
        found[name] = [libc.syscall(number, 0, 0, 0, 0, 0), ctypes.get_errno()]
    print(json.dumps(found))
    """
    result = await run_python_script(tmp_path / "scripts", code)
    found = json.loads(result.stdout)
    assert found == {name: [-1, 1] for name in calls}, found  # EPERM each


# --- memory -----------------------------------------------------------------------------

THREE_CHILDREN = """
import subprocess, sys
hold = (
    "b = bytearray(400 * 1024 * 1024)\\n"
    "for i in range(0, len(b), 4096): b[i] = 1\\n"
    "print('held', flush=True)\\n"
    "import time; time.sleep(2)\\n"
)
children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(3)]
codes = [child.wait() for child in children]
print(codes, flush=True)
sys.exit(0 if all(code == 0 for code in codes) else 1)
"""


async def test_three_processes_cannot_together_pass_the_runs_memory_limit(
    tmp_path: Path,
) -> None:
    if sandbox_status().memory_limit != "cgroup":
        # A normal user has no writable memory controller; there the documented limit
        # is per process (docs/tools.md §6.1), and memfd/shm are refused by the test below.
        pytest.skip("no writable memory cgroup on this machine (storyloom is not root)")
    result = await run_python_script(
        tmp_path / "scripts", THREE_CHILDREN, limits=SandboxLimits(memory_mb=512, wall_seconds=60)
    )
    assert result.stdout.count("held") < 3, result.stdout
    assert result.limit == "memory", (result.describe(), result.stdout, result.stderr)


async def test_memfd_and_sysv_shared_memory_are_refused(tmp_path: Path) -> None:
    code = """
    import ctypes, json, os
    libc = ctypes.CDLL(None, use_errno=True)
    found = {}
    try:
        os.memfd_create("bomb")
        found["memfd"] = "made"
    except OSError as exc:
        found["memfd"] = exc.errno
    found["shmget"] = [libc.shmget(0, 768 * 1024 * 1024, 0o1600), ctypes.get_errno()]
    print(json.dumps(found))
    """
    result = await run_python_script(tmp_path / "scripts", code)
    assert json.loads(result.stdout) == {"memfd": 1, "shmget": [-1, 1]}


# --- what the sandbox shows ---------------------------------------------------------------


async def test_the_mount_table_names_no_path_of_the_checkout_and_site_packages_is_empty(
    tmp_path: Path,
) -> None:
    folders = base_site_packages()
    code = f"""
    import json, os
    listed = {{folder: os.listdir(folder) for folder in {folders!r} if os.path.isdir(folder)}}
    print(json.dumps({{"mountinfo": open("/proc/self/mountinfo").read(), "listed": listed}}))
    """
    result = await run_python_script(tmp_path / "scripts", code)
    seen = json.loads(result.stdout)
    assert CHECKOUT not in seen["mountinfo"], seen["mountinfo"]
    assert folders, "the base interpreter has a site-packages folder to hide"
    assert all(listing == [] for listing in seen["listed"].values()), seen["listed"]


# --- the runner's report ------------------------------------------------------------------


async def test_a_forged_report_with_a_deep_file_name_is_a_failed_call_naming_it(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / "scratch"
    first = await execute_code("python", "open('kept.txt', 'w').write('before')", scratch=scratch)
    assert first.error is None
    # The code writes a report of its own into the runner's stdout (its parent's fd 1,
    # reachable through /proc) and kills the runner, so the forged line is the last.
    forged = {"stdout": "forged", "contents": [{"name": "a/" * 1200 + "f", "data": "eA=="}]}
    code = f"""
import json, os, signal
with open(f"/proc/{{os.getppid()}}/fd/1", "w") as runner_stdout:
    runner_stdout.write(json.dumps({forged!r}) + "\\n")
os.kill(os.getppid(), signal.SIGKILL)
"""
    result = await execute_code("python", code, scratch=scratch)
    assert result.error is not None and "1,201 folders deep" in result.error, result.error
    after = await execute_code("python", "print(open('kept.txt').read())", scratch=scratch)
    assert after.stdout.strip() == "before"


async def test_a_scratch_nested_past_the_cap_still_reports(tmp_path: Path) -> None:
    code = """
import os
for _ in range(1200):
    os.mkdir("a")
    os.chdir("a")
open("f", "w").write("x")
print("made")
"""
    result = await execute_code("python", code, scratch=tmp_path / "scratch")
    assert result.error is None and result.stdout.strip() == "made", (result.error, result.stderr)
