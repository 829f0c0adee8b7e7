"""Script tools through the real ToolManager, plugin host and sandbox (real bwrap, real
Python and Node): the seed's two example plugins run as written, the network is off
unless declared and granted, config values reach the script, the plugin folder is
read-only, the environment is empty, and every kind of bad script is a tool error that
names the tool while the next call still works."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import yaml

from storyloom.core.settings import Settings, SettingsStore
from storyloom.project.project_file import init_project
from storyloom.sandbox.bwrap import probe_sandbox, sandbox_status
from storyloom.tools import builtin_tools
from storyloom.tools.config_options import plugin_option_key
from storyloom.tools.plugin_host import PluginHost
from storyloom.tools.script_tool import bind_script_tool, parse_stdout
from storyloom.tools.tool_manager import ToolCallResult
from tests.cli.cli_support import storyloom
from tests.server.conftest import start_live_server
from tests.tools.plugin_support import HOSTS, write_plugin
from tests.tools.tool_support import Tools, make_tools

SEED_PLUGINS = Path(__file__).parent / "script_plugins"
BILIBILI = "BilibiliFetch:getSubtitle"
AWESOME = "MyAwesomePlugin:doSomething"
VIDEO = "https://www.bilibili.com/video/BV1GJ411x7h7?p=1"
BVID = "BV1GJ411x7h7"


@dataclass
class Env:
    tools: Tools
    store: SettingsStore
    host: PluginHost
    plugins: Path = field(init=False)

    def __post_init__(self) -> None:
        self.plugins = self.tools.project / "plugins"

    def enable(self, name: str, *, grant_network: bool = False) -> None:
        self.host.set_enabled(
            self.store, name, True, grant_network=grant_network, accept_risk="high"
        )
        self.tools.registry.invalidate()

    def set_values(self, plugin: str, **values: Any) -> None:
        current = self.store.read_file()
        extensions = {
            **current.extensions,
            plugin: {**current.extensions.get(plugin, {}), **values},
        }
        self.store.save(current.model_copy(update={"extensions": extensions}))

    async def call(self, tool: str, arguments: dict[str, Any], **context: Any) -> ToolCallResult:
        return await self.tools.manager.call(tool, arguments, self.tools.context(**context))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    # Real bwrap: if the sandbox cannot start here, every test below fails saying why.
    status = sandbox_status()
    assert status.available, f"the sandbox cannot start here: {status.reason}. {status.fix}"
    tools = make_tools(tmp_path)
    store = SettingsStore(tools.home, environ={})

    def settings() -> Settings:
        return store.load().effective

    host = PluginHost(
        tools.project, tools.home, settings, tools.registry.node_registry, builtins=[builtin_tools]
    )
    HOSTS.append(host)
    tools.registry.plugins = host
    tools.manager.hooks = lambda: host.hook
    return Env(tools, store, host)


def copy_seed(env: Env, name: str) -> Path:
    folder = env.plugins / name
    shutil.copytree(SEED_PLUGINS / name, folder)
    env.host.reload()
    return folder


def bilibili_with_network(env: Env) -> Path:
    """The seed's BilibiliFetch plugin as a user would adapt it to fetch: its manifest
    declares ``permissions.network`` and an ``apiBase`` option (where the API is), the
    rest of the files as the seed wrote them."""
    folder = copy_seed(env, "bilibili-fetcher")
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text(encoding="utf-8"))
    manifest["permissions"] = {"network": True}
    manifest["configOptions"] = [
        {"key": "extensions.bilibili-fetcher.apiBase", "type": "string", "label": "API base"}
    ]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True))
    env.host.reload()
    return folder


@dataclass
class FakeBilibili:
    """The three Bilibili web API calls BilibiliFetch makes, answered on loopback."""

    url: str
    seen: list[dict[str, str]]


SUBTITLE = {
    "body": [
        {"from": 0.0, "to": 1.5, "content": "你好"},
        {"from": 1.5, "to": 3.0, "content": "世界"},
    ]
}


@pytest.fixture
def fake_bilibili() -> Iterator[FakeBilibili]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            seen.append({"path": url.path, "cookie": self.headers.get("Cookie", ""), **query})
            base = f"http://{self.headers['Host']}"
            if url.path == "/x/web-interface/view" and query.get("bvid") == BVID:
                body: Any = {"code": 0, "data": {"bvid": BVID, "cid": 42, "title": "测试视频"}}
            elif url.path == "/x/player/v2" and query.get("cid") == "42":
                track = {"lan": "zh-CN", "lan_doc": "中文", "subtitle_url": f"{base}/sub/42.json"}
                body = {"code": 0, "data": {"subtitle": {"subtitles": [track]}}}
            elif url.path == "/sub/42.json":
                body = SUBTITLE
            else:
                body = {"code": -404, "message": "啥都木有"}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield FakeBilibili(f"http://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()


# -- the seed's example plugins ----------------------------------------------------------


def test_both_seed_plugins_load_and_offer_their_script_tools_once_enabled(env: Env) -> None:
    copy_seed(env, "bilibili-fetcher")
    copy_seed(env, "my-awesome-plugin")
    assert not env.host.problems, env.host.problems
    env.enable("bilibili-fetcher")
    env.enable("my-awesome-plugin")
    entries = {e.id: e for e in env.tools.registry.entries()}
    for tool in (BILIBILI, AWESOME):
        assert entries[tool].available, entries[tool].unavailable_reason
        assert entries[tool].implementation_type == "script"
    assert entries[BILIBILI].plugin == "bilibili-fetcher"
    assert entries[AWESOME].plugin == "my-awesome-plugin"


async def test_bilibili_fetch_as_the_seed_wrote_it_runs_without_network(env: Env) -> None:
    copy_seed(env, "bilibili-fetcher")
    # A grant for a plugin that does not declare permissions.network gives nothing.
    env.enable("bilibili-fetcher", grant_network=True)
    assert env.host.plugin("bilibili-fetcher").network_granted is False
    result = await env.call(BILIBILI, {"url": VIDEO})
    assert not result.ok
    assert (result.error or "").startswith(f"tool {BILIBILI}: network unavailable: ")


async def test_bilibili_fetch_reaches_the_api_when_network_is_declared_and_granted(
    env: Env, fake_bilibili: FakeBilibili
) -> None:
    bilibili_with_network(env)
    env.enable("bilibili-fetcher", grant_network=True)
    env.set_values("bilibili-fetcher", apiBase=fake_bilibili.url, bilibiliCookie="SESSDATA=s3")
    result = await env.call(BILIBILI, {"url": VIDEO})
    assert result.ok, result.error
    assert result.result["bvid"] == BVID and result.result["title"] == "测试视频"
    assert result.result["text"] == "你好\n世界"
    assert [line["content"] for line in result.result["lines"]] == ["你好", "世界"]
    # The configSchema value went to the script, which sent it as the Cookie header.
    assert [s["path"] for s in fake_bilibili.seen] == [
        "/x/web-interface/view",
        "/x/player/v2",
        "/sub/42.json",
    ]
    assert {s["cookie"] for s in fake_bilibili.seen} == {"SESSDATA=s3"}


async def test_a_declared_network_stays_off_until_the_user_grants_it(
    env: Env, fake_bilibili: FakeBilibili
) -> None:
    bilibili_with_network(env)
    env.set_values("bilibili-fetcher", apiBase=fake_bilibili.url)
    env.enable("bilibili-fetcher")
    refused = await env.call(BILIBILI, {"url": VIDEO})
    assert (refused.error or "").startswith(f"tool {BILIBILI}: network unavailable: ")
    assert fake_bilibili.seen == []  # the host's loopback is not the sandbox's
    env.enable("bilibili-fetcher", grant_network=True)
    assert (await env.call(BILIBILI, {"url": VIDEO})).ok
    # Enabling again without the grant withdraws it.
    env.enable("bilibili-fetcher")
    again = await env.call(BILIBILI, {"url": VIDEO})
    assert not again.ok and "network unavailable" in (again.error or "")
    assert len(fake_bilibili.seen) == 3


async def test_my_awesome_plugin_runs_its_ts_file_with_node_and_reads_its_config(
    env: Env,
) -> None:
    copy_seed(env, "my-awesome-plugin")
    env.enable("my-awesome-plugin")
    result = await env.call(AWESOME, {"input": "hello big world"})
    assert result.ok, result.error
    assert result.result == {
        "input": "hello big world",
        "length": 15,
        "featureX": True,  # the plugin option's defaultValue
        "upper": "HELLO BIG WORLD",
        "words": 3,
        "reversed": "dlrow gib olleh",
    }
    env.set_values("my-awesome-plugin", enableFeatureX=False)
    off = await env.call(AWESOME, {"input": "héllo"})
    assert off.result == {"input": "héllo", "length": 5, "featureX": False}


# -- what a script sees ------------------------------------------------------------------

REPORT = """
import json, os, sys
request = json.loads(sys.stdin.readline())
wrote = {}
for path in ("/plugin/scripts/new.txt", "/plugin/report.py", "/scratch/new.txt"):
    try:
        with open(path, "a") as f:
            f.write("x")
        wrote[path] = "ok"
    except OSError as exc:
        wrote[path] = exc.strerror
print(json.dumps({"result": {
    "request": request, "cwd": os.getcwd(), "environ": dict(os.environ), "wrote": wrote,
    "listing": sorted(os.listdir("/plugin")),
}}))
"""


def write_report_plugin(env: Env) -> Path:
    tool = {
        "id": "seer:report",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "implementation": {"type": "script", "command": "python3 report.py", "cwd": "scripts"},
        "configSchema": [
            {"key": "token", "type": "secret", "label": "Token"},
            {"key": "mode", "type": "string", "label": "Mode", "defaultValue": "fast"},
        ],
    }
    manifest = {
        "configOptions": [{"key": "extensions.seer.level", "type": "integer", "label": "Level"}]
    }
    files = {"tools/report.tool.json": json.dumps(tool), "scripts/report.py": REPORT}
    folder = write_plugin(env.plugins, "seer", manifest, files)
    env.host.reload()
    env.enable("seer")
    return folder


async def test_the_script_gets_the_request_and_config_with_secrets_decrypted(env: Env) -> None:
    write_report_plugin(env)
    env.host.secrets.set(plugin_option_key("seer", "token"), "t0ken")
    env.set_values("seer", level=3)
    result = await env.call("seer:report", {"n": 7})
    assert result.ok, result.error
    assert result.result["request"] == {
        "arguments": {"n": 7},
        "config": {"token": "t0ken", "mode": "fast", "level": 3},
        "tool": "seer:report",
    }
    assert result.result["cwd"] == "/plugin/scripts"
    assert result.result["listing"] == ["plugin.yaml", "scripts", "tools"]


async def test_a_python_script_imports_the_modules_shipped_beside_it(env: Env) -> None:
    tool = {
        "id": "neighbour:greet",
        "parameters": {"type": "object", "properties": {}},
        "implementation": {"type": "script", "command": "python scripts/greet.py"},
    }
    files = {
        "tools/greet.tool.json": json.dumps(tool),
        "scripts/greet.py": "import json, words\nprint(json.dumps({'result': words.HELLO}))\n",
        "scripts/words.py": "HELLO = 'hello from a neighbour'\n",
    }
    write_plugin(env.plugins, "neighbour", {}, files)
    env.host.reload()
    env.enable("neighbour")
    result = await env.call("neighbour:greet", {})
    assert result.ok, result.error
    assert result.result == "hello from a neighbour"


async def test_the_plugin_folder_is_read_only_and_only_scratch_is_writable(env: Env) -> None:
    folder = write_report_plugin(env)
    before = (folder / "scripts" / "report.py").read_text()
    result = await env.call("seer:report", {})
    assert result.ok, result.error
    wrote = result.result["wrote"]
    assert wrote["/scratch/new.txt"] == "ok"
    assert wrote["/plugin/scripts/new.txt"] == "Read-only file system"
    assert wrote["/plugin/report.py"] in ("Read-only file system", "No such file or directory")
    assert not (folder / "scripts" / "new.txt").exists()
    assert (folder / "scripts" / "report.py").read_text() == before


async def test_the_script_sees_an_empty_environment(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_report_plugin(env)
    monkeypatch.setenv("STORYLOOM_TEST_API_KEY", "sk-do-not-leak")
    result = await env.call("seer:report", {})
    assert result.ok, result.error
    environ = result.result["environ"]
    assert "STORYLOOM_TEST_API_KEY" not in environ
    assert "sk-do-not-leak" not in json.dumps(environ)
    assert set(environ) <= {"PATH", "HOME", "TMPDIR", "LANG", "PWD", "LC_CTYPE"}
    assert environ["HOME"] == "/scratch"


# -- bad scripts ---------------------------------------------------------------------------

BAD_SCRIPTS: dict[str, tuple[str, str]] = {
    # name: (script body, what the error says after "tool bad:<name>: ")
    "prose": ("print('hello there, I am not JSON')", "printed something that is not JSON"),
    "silent": ("pass", "printed nothing on stdout"),
    "crash": (
        "import sys\nsys.stderr.write('first\\nboom: the details\\n')\nsys.exit(3)",
        "the command failed (exit code 3)",
    ),
    "flood": ("import sys\nsys.stdout.write('x' * (3 * 1024 * 1024))", "wrote more than 1 MB"),
    "sleepy": ("import time\ntime.sleep(60)", "did not finish within 1 s"),
    "refuses": (
        "import json\nprint(json.dumps({'error': 'the answer is no'}))",
        "the answer is no",
    ),
    "broken": ("def oops(:\n    pass", "the command failed (exit code 1)"),
    "array": ("print('[1, 2]')", "printed JSON that is not an object"),
    "neither": (
        "print('{\"value\": 1}')",
        'printed a JSON object with neither "result" nor "error"',
    ),
}


def write_bad_plugin(env: Env) -> None:
    files: dict[str, str] = {}
    for name, (body, _) in BAD_SCRIPTS.items():
        files[f"scripts/{name}.py"] = body
        implementation: dict[str, Any] = {"type": "script", "command": f"python scripts/{name}.py"}
        if name == "sleepy":
            implementation["timeout"] = 1000
        files[f"tools/{name}.tool.json"] = json.dumps(
            {
                "id": f"bad:{name}",
                "parameters": {"type": "object"},
                "implementation": implementation,
            }
        )
    commands = {
        "bun": "bun run x.ts",
        "unquoted": "python 'scripts/x.py",
        "outside": "../../bin/sh -c true",
        "missing": "./bin/none",
        "logs": "python scripts/logs.py",
        "pretty": "python scripts/pretty.py",
    }
    for name, command in commands.items():
        files[f"tools/{name}.tool.json"] = json.dumps(
            {
                "id": f"bad:{name}",
                "parameters": {"type": "object"},
                "implementation": {"type": "script", "command": command},
            }
        )
    files["scripts/logs.py"] = "print('loading...')\nprint('step 2')\nprint('{\"result\": 42}')"
    files["scripts/pretty.py"] = "import json\nprint(json.dumps({'result': [1, 2]}, indent=2))"
    write_plugin(env.plugins, "bad", {}, files)
    env.host.reload()
    env.enable("bad")


@pytest.mark.parametrize("name", list(BAD_SCRIPTS))
async def test_a_bad_script_is_a_tool_error_naming_the_tool_and_the_next_call_works(
    env: Env, name: str
) -> None:
    write_bad_plugin(env)
    result = await env.call(f"bad:{name}", {}, timeout_s=30)
    assert not result.ok and result.decision == "allowed"
    error = result.error or ""
    assert error.startswith(f"tool bad:{name}: "), error
    assert BAD_SCRIPTS[name][1] in error, error
    # The server and the turn go on: the next call runs.
    assert (await env.call("bad:logs", {})).result == 42


async def test_the_errors_carry_what_helps_to_fix_the_script(env: Env) -> None:
    write_bad_plugin(env)
    prose = (await env.call("bad:prose", {})).error or ""
    assert "'hello there, I am not JSON" in prose
    crash = (await env.call("bad:crash", {})).error or ""
    assert "boom: the details" in crash and "first" in crash
    broken = (await env.call("bad:broken", {})).error or ""
    assert "SyntaxError" in broken


async def test_log_lines_before_the_reply_and_a_reply_on_several_lines_are_fine(
    env: Env,
) -> None:
    write_bad_plugin(env)
    assert (await env.call("bad:logs", {})).result == 42
    assert (await env.call("bad:pretty", {})).result == [1, 2]


async def test_a_command_that_cannot_run_is_listed_unavailable_with_the_reason(env: Env) -> None:
    write_bad_plugin(env)
    entries = {e.id: e for e in env.tools.registry.entries()}
    reasons = {
        "bun": "command 'bun' is not installed (looked in /usr/local/bin, /usr/bin, /bin)",
        "unquoted": 'cannot parse command "python \'scripts/x.py": No closing quotation',
        "outside": "command '../../bin/sh' leaves the plugin folder",
        "missing": "command './bin/none' is not a file of the plugin",
    }
    for name, reason in reasons.items():
        entry = entries[f"bad:{name}"]
        assert not entry.available
        assert (entry.unavailable_reason or "").startswith(reason), entry.unavailable_reason
    called = await env.call("bad:bun", {})
    assert called.decision == "unknown"
    assert (called.error or "").startswith(
        "tool 'bad:bun' is not available: command 'bun' is not installed"
    )


def test_where_the_sandbox_cannot_start_a_script_tool_is_unavailable_saying_why(
    env: Env, tmp_path: Path
) -> None:
    copy_seed(env, "my-awesome-plugin")
    env.enable("my-awesome-plugin")
    entry = env.tools.registry.get(AWESOME)
    # A real probe with a bwrap that is not there: what a machine without one reports.
    broken = probe_sandbox(str(tmp_path / "no-bwrap"))
    assert not broken.available
    bound = bind_script_tool(replace(entry, function=None), env.host, broken)
    assert not bound.available and bound.function is None
    assert (bound.unavailable_reason or "").startswith(
        "script tools run only in the sandbox, which cannot start here: the bwrap binary "
    )
    assert broken.fix in (bound.unavailable_reason or "")


async def test_the_callers_timeout_also_stops_a_script(env: Env) -> None:
    write_bad_plugin(env)  # bad:sleepy sleeps 60 s; its own timeout is 1 s
    result = await env.call("bad:sleepy", {}, timeout_s=0.5)
    assert not result.ok
    assert "did not finish within 0.5 s" in (result.error or "") or "timed out after 0.5 s" in (
        result.error or ""
    )


@pytest.mark.parametrize(
    ("stdout", "reply"),
    [
        ('{"result": 1}', {"result": 1}),
        ('log\n{"error": "no"}\n\n', {"error": "no"}),
        ('{\n  "result": {"a": 1}\n}\n', {"result": {"a": 1}}),
    ],
)
def test_stdout_is_one_json_object_or_ends_with_one(stdout: str, reply: dict[str, Any]) -> None:
    assert parse_stdout(stdout) == (reply, None)


# -- granting the network: CLI and API -----------------------------------------------------


def test_the_cli_grants_network_only_with_grant_network(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    init_project(project)
    folder = project / "plugins" / "bilibili-fetcher"
    shutil.copytree(SEED_PLUGINS / "bilibili-fetcher", folder)
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text(encoding="utf-8"))
    (folder / "plugin.yaml").write_text(
        yaml.safe_dump({**manifest, "permissions": {"network": True}}, allow_unicode=True)
    )
    off = storyloom("plugin", "enable", "bilibili-fetcher", home=home, cwd=project)
    assert off.returncode == 0, off.stderr
    assert "network refused (pass --grant-network to allow)" in off.stdout
    assert SettingsStore(home).read_file().plugins.network == []
    on = storyloom(
        "plugin", "enable", "bilibili-fetcher", "--grant-network", home=home, cwd=project
    )
    assert on.returncode == 0, on.stderr
    assert "network granted" in on.stdout
    assert SettingsStore(home).read_file().plugins.network == ["bilibili-fetcher"]
    listed = storyloom("plugin", "list", "--json", home=home, cwd=project)
    assert json.loads(listed.stdout)["plugins"][0]["networkGranted"] is True
    assert (
        storyloom("plugin", "disable", "bilibili-fetcher", home=home, cwd=project).returncode == 0
    )
    assert SettingsStore(home).read_file().plugins.network == []


def test_the_server_runs_a_seed_plugin_enabled_with_grant_network(
    tmp_path: Path, fake_bilibili: FakeBilibili
) -> None:
    live = start_live_server(tmp_path / "home")
    try:
        plugins = live.home / "projects" / "default" / "plugins"
        folder = plugins / "bilibili-fetcher"
        shutil.copytree(SEED_PLUGINS / "bilibili-fetcher", folder)
        manifest = yaml.safe_load((folder / "plugin.yaml").read_text(encoding="utf-8"))
        manifest["permissions"] = {"network": True}
        manifest["configOptions"] = [
            {"key": "extensions.bilibili-fetcher.apiBase", "type": "string", "label": "API"}
        ]
        (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True))
        with httpx.Client(base_url=live.url, timeout=60) as client:
            listed = client.get("/api/plugins/installed").json()["plugins"]
            assert [(p["name"], p["declares"]["network"]) for p in listed] == [
                ("bilibili-fetcher", True)
            ]
            enabled = client.post("/api/plugins/bilibili-fetcher/enable", json={})
            assert enabled.status_code == 200 and enabled.json()["networkGranted"] is False
            values = {
                "extensions.bilibili-fetcher.apiBase": fake_bilibili.url,
                "extensions.bilibili-fetcher.bilibiliCookie": "SESSDATA=web",
            }
            assert client.put("/api/config", json={"values": values}).status_code == 200
            call = {"tool": BILIBILI, "arguments": {"url": VIDEO}}
            offline = client.post("/api/tools/call", json=call).json()
            assert offline["ok"] is False and "network unavailable" in offline["error"]
            granted = client.post(
                "/api/plugins/bilibili-fetcher/enable", json={"grantNetwork": True}
            )
            assert granted.json()["networkGranted"] is True
            online = client.post("/api/tools/call", json=call).json()
            assert online["ok"] is True, online["error"]
            assert online["result"]["text"] == "你好\n世界"
        assert {s["cookie"] for s in fake_bilibili.seen} == {"SESSDATA=web"}
    finally:
        live.server.should_exit = True
