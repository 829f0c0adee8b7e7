"""Escape attempts through the CodeInterpreter, each run for real in the sandbox.

Each case asserts containment (the attempt changed nothing and reached nothing) and that
the result says clearly what happened. The code under test is exactly what a model or a
user could send to ``CodeInterpreter:execute``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import storyloom
from storyloom.sandbox.code_interpreter import RUNNER_HOST, CodeRunResult, execute_code

SECRET = "sk-test-4f1e0c-do-not-leak"


# Where no sandbox can be made, every test here fails with the reason (never skips).
pytestmark = pytest.mark.usefixtures("sandbox_ready")


def outcome(result: CodeRunResult) -> dict[str, Any]:
    """What the code printed as its one JSON line (the cases report their findings so)."""
    assert result.error is None, (result.error, result.stderr)
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


async def test_ctypes_cannot_gain_privileges_mount_or_make_namespaces() -> None:
    code = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x00020000, 0x40000000
found = {}
for name, call in [
    ("setuid", lambda: libc.setuid(0)),
    ("setgid", lambda: libc.setgid(0)),
    ("unshare_user", lambda: libc.unshare(CLONE_NEWUSER)),
    ("unshare_mount", lambda: libc.unshare(CLONE_NEWNS)),
    ("unshare_net", lambda: libc.unshare(CLONE_NEWNET)),
    ("mount", lambda: libc.mount(b"none", b"/usr", b"tmpfs", 0, None)),
    ("chroot", lambda: libc.chroot(b"/tmp")),
]:
    found[name] = (call(), ctypes.get_errno())
found["uid"] = os.getuid()
print(json.dumps(found))
"""
    found = outcome(await execute_code("python", code))
    for call in ("setuid", "setgid", "unshare_user", "unshare_mount", "unshare_net", "mount"):
        value, errno = found[call]
        assert value == -1 and errno != 0, (call, found[call])
    assert found["chroot"][0] == -1
    assert found["uid"] == 65534


async def test_os_system_runs_as_nobody_and_sees_no_shadow_file() -> None:
    result = await execute_code("python", "import os\nos.system('id; cat /etc/shadow')")
    assert "uid=65534(nobody) gid=65534(nogroup)" in result.stdout
    assert "root:" not in result.stdout
    assert "/etc/shadow: No such file or directory" in result.stderr
    # cat failed: os.system's status (wait status of the shell) is the value.
    assert result.value is not None and result.value != "0"


async def test_subprocess_sees_no_secret_in_any_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STORYLOOM_TEST_API_KEY", SECRET)
    code = """
import glob, json, os, subprocess
seen = {"self": dict(os.environ)}
seen["init"] = subprocess.run(["cat", "/proc/1/environ"], capture_output=True).stdout.decode()
seen["parent"] = open(f"/proc/{os.getppid()}/environ", "rb").read().decode()
seen["all"] = []
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        seen["all"].append(open(path, "rb").read().decode(errors="replace"))
    except OSError as exc:
        seen["all"].append(str(exc))
print(json.dumps(seen))
"""
    result = await execute_code("python", code)
    assert SECRET not in result.stdout and SECRET not in result.stderr
    seen = outcome(result)
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE", "PWD"}
    assert set(seen["self"]) <= allowed
    assert "STORYLOOM" not in json.dumps(seen)


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A TCP server on the host's loopback, as storyloom's own server would be."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                conn, _ = server.accept()
                accepted.append(conn)
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    thread.join(timeout=5)
    assert accepted == [], "the sandbox reached the host's loopback"


async def test_no_network_not_even_the_hosts_loopback(host_listener: int) -> None:
    code = f"""
import json, socket
tried = {{}}
for name, address in [("internet", ("1.1.1.1", 80)), ("loopback", ("127.0.0.1", {host_listener}))]:
    try:
        socket.create_connection(address, timeout=2).close()
        tried[name] = "connected"
    except OSError as exc:
        tried[name] = type(exc).__name__ + ": " + str(exc)
try:
    socket.getaddrinfo("example.com", 443)
    tried["dns"] = "resolved"
except OSError as exc:
    tried["dns"] = type(exc).__name__
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    udp.sendto(b"x", ("8.8.8.8", 53))
    tried["udp"] = "sent"
except OSError as exc:
    tried["udp"] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(tried))
"""
    tried = outcome(await execute_code("python", code))
    assert "Network is unreachable" in str(tried["internet"])
    assert "Connection refused" in str(tried["loopback"])
    assert tried["dns"] == "gaierror"
    assert "Network is unreachable" in str(tried["udp"])


async def test_bash_dev_tcp_reaches_nothing() -> None:
    bash = shutil.which("bash", path="/usr/bin:/bin")
    assert bash is not None, "this machine has no bash; the case needs one"
    code = (
        "import subprocess\n"
        "done = subprocess.run(['bash', '-c', 'echo hi > /dev/tcp/1.1.1.1/80'],"
        " capture_output=True, text=True)\n"
        "print(done.returncode)\nprint(done.stderr)"
    )
    result = await execute_code("python", code)
    assert result.error is None
    code_line, *said = result.stdout.splitlines()
    assert code_line == "1" and "Network is unreachable" in "\n".join(said)


async def test_storyloom_and_the_data_directory_are_out_of_reach(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    settings = home / "settings.json"
    settings.write_text(json.dumps({"user_llm": {"api_key": SECRET}}))
    # Where the host imports storyloom from: the checkout and the venv's site-packages.
    package_root = os.path.dirname(os.path.dirname(storyloom.__file__))
    venv_site = sysconfig.get_paths()["purelib"]
    code = f"""
import json, sys
sys.path[:0] = [{package_root!r}, {venv_site!r}]
found = {{}}
try:
    import storyloom
    found["import"] = "imported"
except ImportError as exc:
    found["import"] = type(exc).__name__
for name, path in [("settings", {str(settings)!r}), ("home", {str(home)!r})]:
    try:
        found[name] = open(path).read()
    except OSError as exc:
        found[name] = type(exc).__name__
print(json.dumps(found))
"""
    result = await execute_code("python", code)
    assert SECRET not in result.stdout
    found = outcome(result)
    assert found == {
        "import": "ModuleNotFoundError",
        "settings": "FileNotFoundError",
        "home": "FileNotFoundError",
    }


async def test_nothing_outside_the_scratch_is_writable() -> None:
    before = RUNNER_HOST.read_bytes()
    code = """
import json
tried = {}
for path in ["/interpreter/runner.py", "/sandbox/launch.py", "/usr/evil", "/etc/passwd", "/evil"]:
    try:
        with open(path, "w") as handle:
            handle.write("owned")
        tried[path] = "written"
    except OSError as exc:
        tried[path] = type(exc).__name__
print(json.dumps(tried))
"""
    tried = outcome(await execute_code("python", code))
    assert all(how != "written" for how in tried.values()), tried
    assert RUNNER_HOST.read_bytes() == before


async def test_global_kernel_settings_are_read_only() -> None:
    # Opened for writing only, never written: where the open succeeds, a write would
    # change the host kernel (core_pattern runs a program as the host's root).
    code = """
import json, os
tried = {}
for path in ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/printk_ratelimit",
             "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger"]:
    try:
        os.close(os.open(path, os.O_WRONLY))
        tried[path] = "writable"
    except OSError as exc:
        tried[path] = type(exc).__name__
print(json.dumps(tried))
"""
    tried = outcome(await execute_code("python", code))
    assert "writable" not in tried.values(), tried


async def test_a_fork_bomb_meets_the_process_limit() -> None:
    code = """
import errno, os, time
children = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
except OSError as exc:
    print(children, errno.errorcode[exc.errno])
"""
    result = await execute_code("python", code)
    assert result.error is None and result.limit is None
    children, error = result.stdout.split()
    assert error == "EAGAIN" and 0 < int(children) < 32


async def test_signals_cannot_reach_host_processes() -> None:
    code = f"""
import os, signal
try:
    os.kill({os.getpid()}, signal.SIGKILL)
    print("sent")
except OSError as exc:
    print(type(exc).__name__)
"""
    result = await execute_code("python", code)
    # The pid means nothing in the sandbox's own pid namespace; this process lives on.
    assert result.stdout == "ProcessLookupError\n"


async def test_javascript_has_no_system_modules_network_or_host_bridge() -> None:
    code = """
JSON.stringify({
  std: typeof std, os: typeof os, fetch: typeof fetch, xhr: typeof XMLHttpRequest,
  require: typeof require, process: typeof process, bridge: typeof __write,
  scriptArgs: typeof scriptArgs, python: typeof python,
})
"""
    result = await execute_code("javascript", code)
    assert result.error is None
    found = json.loads(json.loads(result.value or "null"))
    assert set(found.values()) == {"undefined"}, found
    imported = await execute_code("javascript", "import * as os from 'os';\nos.exec(['id'])")
    assert imported.error is not None and imported.error.startswith("SyntaxError")
    dynamic = await execute_code(
        "javascript",
        "let said = 'pending';\nimport('os').then(() => { said = 'loaded'; },"
        " (e) => { said = String(e); });\nsaid",
    )
    assert dynamic.error is None and "loaded" not in (dynamic.value or "")


async def test_nodejs_reaches_no_network_no_secret_and_no_host_file(
    host_listener: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORYLOOM_TEST_API_KEY", SECRET)
    home = tmp_path / "home"
    home.mkdir()
    settings = home / "settings.json"
    settings.write_text(json.dumps({"user_llm": {"api_key": SECRET}}))
    code = f"""
const fs = require('fs'), net = require('net'), dns = require('dns'), cp = require('child_process')
const found = {{ env: Object.keys(process.env).sort(), uid: process.getuid() }}
for (const [name, path] of [['settings', {json.dumps(str(settings))}],
                            ['runner', {json.dumps(str(RUNNER_HOST))}],
                            ['shadow', '/etc/shadow']]) {{
  try {{ found[name] = fs.readFileSync(path, 'utf8') }} catch (e) {{ found[name] = e.code }}
}}
try {{ fs.writeFileSync('/usr/evil', 'x'); found.write = 'written' }}
catch (e) {{ found.write = e.code }}
found.parentEnv = cp.spawnSync('cat', ['/proc/1/environ']).stdout.toString()
const tryConnect = (port, host) => new Promise((done) => {{
  const socket = net.connect({{ port, host }}, () => {{ socket.destroy(); done('connected') }})
  socket.on('error', (e) => done(e.code))
  socket.setTimeout(2000, () => {{ socket.destroy(); done('timeout') }})
}})
;(async () => {{
  found.loopback = await tryConnect({host_listener}, '127.0.0.1')
  found.internet = await tryConnect(80, '1.1.1.1')
  found.dns = await new Promise((done) =>
    dns.lookup('example.com', (e) => done(e ? e.code : 'resolved')))
  console.log(JSON.stringify(found))
}})()
"""
    result = await execute_code("nodejs", code)
    assert SECRET not in result.stdout and SECRET not in result.stderr
    found = outcome(result)
    assert set(found["env"]) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE", "PWD"}
    assert found["uid"] != 0
    assert (found["settings"], found["runner"], found["shadow"]) == ("ENOENT",) * 3
    assert found["write"] in {"EROFS", "EACCES"}
    assert "STORYLOOM" not in found["parentEnv"]
    assert found["loopback"] == "ECONNREFUSED"
    assert found["internet"] == "ENETUNREACH"
    assert found["dns"] in {"ENOTFOUND", "EAI_AGAIN"}
