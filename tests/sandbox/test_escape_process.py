"""The escape suite: what sandboxed code tries, that it cannot do, and how it ends.

Each case runs a real attack in the real sandbox and checks both that the host was not
reached (nothing left, nothing changed, nothing received) and that the run ended with a
clear error or limit. The attacking scripts are written into a temporary folder that is
mounted read-only; they report what they saw on stdout, so the assertions read it.
No assertion is about how long anything took.
"""

from __future__ import annotations

import asyncio
import os
import urllib.request
from pathlib import Path

import pytest

from storyloom.sandbox import Mount, SandboxLimits
from tests.sandbox.sandbox_support import (
    HostHttp,
    new_marker,
    own_children,
    processes_with,
    run_python_script,
)

pytestmark = pytest.mark.usefixtures("sandbox_ready")


def scripts(tmp_path: Path) -> Path:
    return tmp_path / "scripts"


def host_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return bytes(response.read())


def read_text(path: str) -> str:
    with open(path) as file:
        return file.read()


def folder_contents(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir()}


async def host_can_start_a_process() -> bool:
    process = await asyncio.create_subprocess_exec("true")
    return await process.wait() == 0


# --- network ------------------------------------------------------------------------------


async def test_a_tcp_connection_to_a_public_address_is_refused(tmp_path: Path) -> None:
    code = """
    import socket
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=5)
        print("CONNECTED")
    except OSError as exc:
        print("refused:", exc.errno, exc.strerror)
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    assert "CONNECTED" not in result.stdout
    assert "Network is unreachable" in result.stdout


async def test_a_udp_datagram_cannot_be_sent(tmp_path: Path) -> None:
    code = """
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x" * 64, ("8.8.8.8", 53))
        print("SENT")
    except OSError as exc:
        print("refused:", exc.strerror)
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    assert "SENT" not in result.stdout
    assert "Network is unreachable" in result.stdout


async def test_a_dns_lookup_fails(tmp_path: Path) -> None:
    code = """
    import socket
    try:
        print("RESOLVED", socket.getaddrinfo("example.com", 443))
    except socket.gaierror as exc:
        print("no dns:", exc.errno)
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    assert "RESOLVED" not in result.stdout
    assert result.stdout.startswith("no dns:")


async def test_the_hosts_loopback_services_are_out_of_reach(
    tmp_path: Path, host_http: HostHttp
) -> None:
    port, seen = host_http.port, host_http.seen
    code = """
    import socket, sys
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
        print("CONNECTED")
    except OSError as exc:
        print("refused:", exc.strerror)
    """
    result = await run_python_script(scripts(tmp_path), code, str(port))

    assert result.ok, result.stderr
    assert result.stdout == "refused: Connection refused\n"
    assert seen == []
    # The server was up all along: the host itself reaches it.
    await asyncio.to_thread(host_get, f"http://127.0.0.1:{port}/host")
    assert seen == ["/host"]


# --- files of the host ---------------------------------------------------------------------


async def test_the_data_directorys_settings_are_not_readable(tmp_path: Path) -> None:
    home = tmp_path / "storyloom-home"
    home.mkdir()
    settings = home / "settings.json"
    settings.write_text('{"api_key": "sk-secret-in-settings"}')
    code = """
    import sys
    try:
        print("READ", open(sys.argv[1]).read())
    except OSError as exc:
        print("unreadable:", exc.strerror)
    """
    result = await run_python_script(scripts(tmp_path), code, str(settings))

    assert result.ok, result.stderr
    assert "sk-secret-in-settings" not in result.stdout
    assert result.stdout == "unreadable: No such file or directory\n"


async def test_etc_shadow_is_not_readable(tmp_path: Path) -> None:
    code = """
    import os
    try:
        print("READ", open("/etc/shadow").read())
    except OSError as exc:
        print("unreadable:", exc.strerror)
    print(sorted(os.listdir("/etc")))
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    assert "READ" not in result.stdout
    assert result.stdout.startswith("unreadable: No such file or directory\n")
    assert "shadow" not in result.stdout


async def test_the_project_outside_the_mounted_plugin_folder_is_invisible(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    plugin = project / "plugins" / "demo"
    plugin.mkdir(parents=True)
    (plugin / "tool.txt").write_text("mine")
    (project / "characters").mkdir()
    (project / "characters" / "alice.json").write_text('{"secret": "project-data"}')
    code = """
    import os, sys
    print(sorted(os.listdir("/plugin")))
    for path in ("/plugin/../characters/alice.json", "/plugin/../../characters/alice.json",
                 sys.argv[1]):
        try:
            print("READ", open(path).read())
        except OSError as exc:
            print("unreadable:", exc.strerror)
    """
    result = await run_python_script(
        scripts(tmp_path),
        code,
        str(project / "characters" / "alice.json"),
        mounts=(Mount(plugin, "/plugin"),),
    )

    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "['tool.txt']"
    assert lines[1:] == ["unreadable: No such file or directory"] * 3


async def test_no_secret_of_the_host_environment_is_visible_in_proc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"secret-{new_marker()}"
    monkeypatch.setenv("STORYLOOM_TEST_SECRET", secret)
    code = """
    import os
    seen = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
        try:
            seen.append(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace"))
        except OSError as exc:
            seen.append(f"{pid}: {exc.strerror}")
    print(os.getppid(), len(seen))
    print("\\n".join(seen))
    print(repr(os.environ.get("STORYLOOM_TEST_SECRET")))
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    assert secret not in result.stdout
    assert "STORYLOOM_TEST_SECRET" not in result.stdout.replace('STORYLOOM_TEST_SECRET")', "")
    assert result.stdout.splitlines()[-1] == "None"
    # The parent it can see is the namespace's init, not any host process.
    assert result.stdout.split()[0] == "1"


# --- writing ---------------------------------------------------------------------------------


async def test_the_root_usr_and_a_mounted_folder_are_read_only(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "main.py").write_text("print('original')")
    before = folder_contents(plugin)
    code = """
    for path in ("/evil", "/usr/evil", "/usr/bin/python3", "/plugin/main.py", "/plugin/new.py"):
        try:
            with open(path, "w") as f:
                f.write("pwned")
            print("WROTE", path)
        except OSError as exc:
            print(path, exc.strerror)
    """
    result = await run_python_script(scripts(tmp_path), code, mounts=(Mount(plugin, "/plugin"),))

    assert result.ok, result.stderr
    assert "WROTE" not in result.stdout
    assert result.stdout.count("Read-only file system") == 5
    assert folder_contents(plugin) == before
    assert "evil" not in os.listdir("/")


# --- resources ----------------------------------------------------------------------------


async def test_a_fork_bomb_is_stopped_by_the_process_limit(tmp_path: Path) -> None:
    code = """
    import os, time
    started = 0
    error = None
    for _ in range(1000):
        try:
            pid = os.fork()
        except OSError as exc:
            error = exc
            break
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        started += 1
    print(started, error.strerror if error else None, flush=True)
    """
    result = await run_python_script(
        scripts(tmp_path), code, limits=SandboxLimits(processes=16, wall_seconds=20)
    )

    assert result.ok, result.stderr
    started, _, message = result.stdout.strip().partition(" ")
    assert int(started) < 16
    assert message == "Resource temporarily unavailable"
    # The host can still start processes.
    assert await host_can_start_a_process()


async def test_a_memory_bomb_is_stopped_by_the_memory_limit(tmp_path: Path) -> None:
    code = """
    blocks = []
    while True:
        blocks.append(bytearray(16 * 1024 * 1024))
    """
    result = await run_python_script(scripts(tmp_path), code, limits=SandboxLimits(memory_mb=200))

    assert result.limit == "memory"
    assert result.exit_code == 1
    assert result.stderr.rstrip().endswith("MemoryError")


async def test_a_cpu_loop_is_stopped_by_the_cpu_time_limit(tmp_path: Path) -> None:
    code = """
    print("spinning", flush=True)
    while True:
        pass
    """
    result = await run_python_script(
        scripts(tmp_path), code, limits=SandboxLimits(cpu_seconds=1, wall_seconds=60)
    )

    assert result.limit == "cpu_time"
    assert result.exit_code is None and result.signal is not None
    assert result.stdout == "spinning\n"
    assert result.describe() == "stopped by the cpu_time limit (1 s of CPU)"


async def test_a_cpu_loop_that_outlives_the_wall_clock_is_the_wall_time_limit(
    tmp_path: Path,
) -> None:
    code = """
    while True:
        pass
    """
    result = await run_python_script(
        scripts(tmp_path), code, limits=SandboxLimits(cpu_seconds=600, wall_seconds=1)
    )

    assert result.limit == "wall_time"


async def test_filling_the_disk_ends_in_enospc_inside_scratch(tmp_path: Path) -> None:
    code = """
    import os
    written = 0
    block = b"x" * (1024 * 1024)
    try:
        for n in range(1000):
            with open(f"/scratch/fill-{n}", "wb") as f:
                for _ in range(4):
                    f.write(block)
                    written += len(block)
    except OSError as exc:
        print(exc.strerror, written // (1024 * 1024))
    """
    result = await run_python_script(
        scripts(tmp_path), code, limits=SandboxLimits(scratch_mb=16, file_size_mb=4)
    )

    assert result.ok, result.stderr
    message, _, mib = result.stdout.strip().rpartition(" ")
    assert message == "No space left on device"
    assert int(mib) <= 16
    assert not [name for _, _, names in os.walk(tmp_path) for name in names if "fill-" in name]


async def test_huge_stdout_is_capped_and_stops_the_run(tmp_path: Path) -> None:
    code = """
    import sys
    line = "y" * 1023 + "\\n"
    while True:
        sys.stdout.write(line)
    """
    result = await run_python_script(scripts(tmp_path), code, limits=SandboxLimits(output_kb=64))

    assert result.limit == "output"
    assert result.stdout_truncated
    assert len(result.stdout.encode()) <= 64 * 1024
    assert result.describe() == "stopped by the output limit (64 KB)"


# --- processes ---------------------------------------------------------------------------


async def test_no_zombie_or_orphan_survives_a_wall_time_kill(tmp_path: Path) -> None:
    marker = new_marker()
    code = """
    import os, signal, sys, time
    marker = sys.argv[1]
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            sleeper = (
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "time.sleep(600)"
            )
            os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", sleeper, marker])
        os._exit(0)  # the middle child: a zombie, never waited for
    print("daemonized", flush=True)
    time.sleep(600)
    """
    children_before = own_children()

    result = await run_python_script(
        scripts(tmp_path), code, marker, limits=SandboxLimits(wall_seconds=4)
    )

    assert result.limit == "wall_time"
    assert result.stdout == "daemonized\n"
    assert processes_with(marker) == []
    assert own_children() <= children_before


async def test_signals_to_the_parent_and_to_everyone_do_not_reach_the_host(
    tmp_path: Path,
) -> None:
    bystander = await asyncio.create_subprocess_exec("sleep", "600")
    try:
        code = """
        import os, signal, sys
        for target in (os.getppid(), -1, int(sys.argv[1]), int(sys.argv[2])):
            try:
                os.kill(target, signal.SIGKILL)
                print(target, "sent")
            except OSError as exc:
                print(target, exc.strerror)
        print("still here")
        """
        result = await run_python_script(
            scripts(tmp_path), code, str(bystander.pid), str(os.getpid())
        )

        assert result.ok, result.stderr
        lines = result.stdout.splitlines()
        assert lines[-1] == "still here"
        # Host pids do not exist in the sandbox's pid namespace.
        assert f"{bystander.pid} No such process" in lines
        assert f"{os.getpid()} No such process" in lines
        assert bystander.returncode is None
    finally:
        bystander.kill()
        await bystander.wait()


async def test_no_capabilities_and_setuid_root_fails(tmp_path: Path) -> None:
    code = """
    import os
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    print(status["CapEff"].strip(), status["CapBnd"].strip(), status["NoNewPrivs"].strip())
    try:
        os.setuid(0)
        print("BECAME ROOT")
    except OSError as exc:
        print("setuid:", exc.strerror)
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    caps, setuid = result.stdout.splitlines()
    eff, bnd, _ = caps.split()
    assert int(eff, 16) == 0 and int(bnd, 16) == 0
    # uid 0 is not even mapped in the sandbox's user namespace (EINVAL); without it, no
    # capability allows the change either (EPERM).
    assert setuid in ("setuid: Invalid argument", "setuid: Operation not permitted")


async def test_a_new_user_namespace_cannot_be_made(tmp_path: Path) -> None:
    code = """
    import subprocess
    done = subprocess.run(["unshare", "--user", "--map-root-user", "id", "-u"],
                          capture_output=True, text=True)
    print(done.returncode, done.stdout.strip() or "-", done.stderr.strip())
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    code_text, uid, message = result.stdout.strip().split(" ", 2)
    assert code_text != "0" and uid == "-"
    assert "unshare failed" in message


async def test_mounting_a_filesystem_fails(tmp_path: Path) -> None:
    code = """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.mount(b"none", b"/scratch", b"tmpfs", 0, None)
    print(rc, os.strerror(ctypes.get_errno()))
    rc = libc.mount(b"/", b"/scratch", None, 4096, None)  # MS_BIND of the whole root
    print(rc, os.strerror(ctypes.get_errno()))
    """
    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    assert result.stdout.splitlines() == ["-1 Operation not permitted"] * 2


async def test_the_kernels_global_settings_cannot_be_written(tmp_path: Path) -> None:
    code = """
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
                 "/proc/sys/kernel/hostname", "/proc/sysrq-trigger"):
        try:
            with open(path, "w") as f:
                f.write("|/scratch/evil")
            print(path, "WRITTEN")
        except OSError as exc:
            print(path, exc.strerror)
    """
    before = read_text("/proc/sys/kernel/core_pattern")

    result = await run_python_script(scripts(tmp_path), code)

    assert result.ok, result.stderr
    assert "WRITTEN" not in result.stdout
    assert "/proc/sys/kernel/core_pattern Read-only file system" in result.stdout
    assert read_text("/proc/sys/kernel/core_pattern") == before
