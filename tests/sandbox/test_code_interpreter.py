"""The CodeInterpreter end to end: real bubblewrap, the real sandboxed Python and quickjs.

Every test needs the sandbox; where it cannot be made the tests fail (never skip): code
must not run unsandboxed, and CI must show that it could not run at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storyloom.sandbox.code_interpreter import DEFAULT_LIMITS, CodeRunResult, execute_code
from storyloom.sandbox.limits import SandboxLimits

# Where no sandbox can be made, every test here fails with the reason (never skips).
pytestmark = pytest.mark.usefixtures("sandbox_ready")


def limits(**changes: object) -> SandboxLimits:
    return DEFAULT_LIMITS.model_copy(update=changes)


def ran_cleanly(result: CodeRunResult) -> bool:
    return result.error is None and result.limit is None and result.exit_code == 0


async def test_print_goes_to_stdout() -> None:
    result = await execute_code("python", "print(6*7)")
    assert result.stdout == "42\n"
    assert result.value is None and result.files == [] and ran_cleanly(result)
    assert result.language == "python" and result.duration_ms > 0


async def test_the_last_expression_is_the_value_as_its_repr() -> None:
    result = await execute_code("python", "answer = 21\nprint('working')\nanswer * 2")
    assert (result.stdout, result.value) == ("working\n", "42")
    text = await execute_code("python", "'a' + 'b'")
    assert text.value == "'ab'"
    big = await execute_code("python", "list(range(100000))")
    assert big.value is not None and len(big.value) <= 4096 and big.value.startswith("[0, 1, 2")
    statement = await execute_code("python", "x = 1")
    assert statement.value is None and ran_cleanly(statement)


async def test_files_written_in_scratch_are_listed_with_small_text_inline() -> None:
    code = (
        "import os\n"
        "open('notes.txt', 'w').write('hello\\n')\n"
        "os.mkdir('out')\n"
        "open('out/data.bin', 'wb').write(bytes(range(256)))\n"
        "open('big.txt', 'w').write('x' * 5000)\n"
    )
    result = await execute_code("python", code)
    assert ran_cleanly(result)
    files = {f.name: (f.size, f.text) for f in result.files}
    assert files == {
        "notes.txt": (6, "hello\n"),
        "out/data.bin": (256, None),
        "big.txt": (5000, None),
    }


async def test_a_runtime_error_gives_its_line_and_keeps_the_output_before_it() -> None:
    code = "print('before')\ndef half(n):\n    return n / 0\nhalf(4)\n"
    result = await execute_code("python", code)
    assert result.error == "ZeroDivisionError: division by zero (line 3)"
    assert result.stdout == "before\n" and result.exit_code == 1 and result.limit is None
    assert 'File "<code>", line 3, in half' in result.stderr
    # The runner's own frames are not the reader's business.
    assert "interpreter_runner" not in result.stderr


async def test_a_syntax_error_gives_its_line() -> None:
    result = await execute_code("python", "x = 1\nif x\n    print(x)\n")
    assert result.error is not None
    assert result.error.startswith("SyntaxError:") and result.error.endswith("(line 2)")
    assert result.exit_code == 1 and result.stdout == ""


async def test_the_code_runs_as_the_main_module() -> None:
    code = (
        "import dataclasses, pickle, sys\n"
        "@dataclasses.dataclass\nclass Point:\n    x: int\n"
        "(__name__, sys.argv, pickle.loads(pickle.dumps(Point(3))))"
    )
    result = await execute_code("python", code)
    assert result.value == "('__main__', ['<code>'], Point(x=3))" and ran_cleanly(result)


async def test_sys_exit_and_os_exit_end_the_code_with_their_code() -> None:
    exited = await execute_code("python", "import sys\nprint('bye')\nsys.exit(3)")
    assert (exited.stdout, exited.exit_code) == ("bye\n", 3)
    assert exited.error == "SystemExit: exit code 3"
    hard = await execute_code("python", "import os\nos._exit(0)")
    assert ran_cleanly(hard)


async def test_an_endless_loop_is_stopped_by_the_wall_time_limit() -> None:
    code = "print('started')\nwhile True:\n    pass\n"
    result = await execute_code("python", code, limits=limits(wall_seconds=1))
    assert result.limit == "wall_time"
    assert result.error == "stopped: the 1 s wall-time limit"
    assert result.stdout == "started\n" and result.exit_code is None


async def test_output_past_the_cap_is_cut_and_the_code_runs_on() -> None:
    result = await execute_code("python", "print('x' * 200_000)\n'done'")
    assert result.value == "'done'" and ran_cleanly(result)
    assert result.stdout.startswith("x" * 1000)
    assert "[output truncated: 200001 bytes in all, the first 65536 shown]" in result.stdout
    assert len(result.stdout) < 66_000


async def test_a_memory_bomb_is_stopped_by_the_memory_limit() -> None:
    result = await execute_code("python", "blocks = [bytearray(64 * 2**20) for _ in range(64)]")
    assert result.limit == "memory"
    assert result.error is not None and result.error.startswith("stopped: the 512 MB memory")
    assert "MemoryError" in result.error


async def test_a_file_past_the_size_limit_is_stopped_by_the_file_size_limit() -> None:
    code = "open('huge.bin', 'wb').write(b'0' * (2 * 2**20))"
    result = await execute_code("python", code, limits=limits(file_size_mb=1))
    assert result.limit == "file_size"
    assert result.error is not None and "1 MB file-size limit" in result.error


async def test_javascript_prints_and_returns_its_completion_value() -> None:
    code = "console.log('sum', 1 + 2, {a: [1]});\nprint('via print');\nconst x = {b: [2, 3]};\nx"
    result = await execute_code("javascript", code)
    assert result.stdout == 'sum 3 {"a":[1]}\nvia print\n'
    assert result.value == '{"b":[2,3]}' and ran_cleanly(result)
    text = await execute_code("javascript", "'he' + 'llo'")
    assert text.value == '"hello"'
    function = await execute_code("javascript", "(function named() {})")
    assert function.value is not None and function.value.startswith("function named")
    warned = await execute_code("javascript", "console.error('bad', 7)")
    assert warned.stderr == "bad 7\n" and warned.value is None


async def test_javascript_errors_give_their_line() -> None:
    thrown = await execute_code("javascript", "let a = 1;\n\nnull.field;")
    assert thrown.error == "TypeError: cannot read property 'field' of null (line 3)"
    assert thrown.exit_code == 1
    syntax = await execute_code("javascript", "let a = ;")
    assert syntax.error is not None
    assert syntax.error.startswith("SyntaxError") and syntax.error.endswith("(line 1)")
    custom = await execute_code("javascript", "\nthrow new RangeError('too far')")
    assert custom.error == "RangeError: too far (line 2)"


async def test_javascript_endless_loop_and_memory_bomb_are_stopped() -> None:
    loop = await execute_code("javascript", "for (;;) {}", limits=limits(wall_seconds=1))
    assert loop.limit == "wall_time" and loop.error == "stopped: the 1 s wall-time limit"
    bomb = await execute_code(
        "javascript", "const keep = [];\nfor (;;) keep.push(new Array(100000).fill(7));"
    )
    assert bomb.limit == "memory"
    assert bomb.error is not None and bomb.error.startswith("stopped: the 256 MB memory limit")


async def test_scratch_persists_between_calls_on_one_folder(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "one"
    first = await execute_code(
        "python",
        "import os\nos.makedirs('data', exist_ok=True)\n"
        "open('data/count.txt', 'w').write('1')\nopen('blob.bin', 'wb').write(b'\\x00\\xff')",
        scratch=run,
    )
    assert ran_cleanly(first)
    second = await execute_code(
        "python",
        "n = int(open('data/count.txt').read()) + 1\n"
        "open('data/count.txt', 'w').write(str(n))\n"
        "(n, open('blob.bin', 'rb').read())",
        scratch=run,
    )
    assert second.value == "(2, b'\\x00\\xff')" and ran_cleanly(second)
    assert {f.name: f.text for f in second.files}["data/count.txt"] == "2"
    # The host keeps one version of the files, behind a symlink swapped at each call.
    current = run / "current"
    assert current.is_symlink()
    assert (current / "data" / "count.txt").read_text() == "2"
    assert sorted(p.name for p in run.iterdir()) == sorted(["current", os.readlink(current)])


async def test_scratch_is_not_shared_between_folders_nor_without_one(tmp_path: Path) -> None:
    await execute_code("python", "open('mine.txt', 'w').write('secret')", scratch=tmp_path / "a")
    other = await execute_code("python", "import os\nos.listdir('.')", scratch=tmp_path / "b")
    assert other.value == "[]"
    fresh = await execute_code("python", "import os\nos.listdir('.')")
    assert fresh.value == "[]"
    assert (tmp_path / "a" / "current" / "mine.txt").read_text() == "secret"


async def test_a_timed_out_call_still_keeps_the_files_it_wrote(tmp_path: Path) -> None:
    code = "open('partial.txt', 'w').write('so far')\nwhile True:\n    pass\n"
    result = await execute_code("python", code, scratch=tmp_path, limits=limits(wall_seconds=1))
    assert result.limit == "wall_time"
    assert [(f.name, f.text) for f in result.files] == [("partial.txt", "so far")]
    assert (tmp_path / "current" / "partial.txt").read_text() == "so far"


async def test_nodejs_prints_requires_and_returns_its_completion_value_awaited() -> None:
    code = (
        "const path = require('path');\n"
        "console.log('sum', 1 + 2);\n"
        "console.error('warned');\n"
        "new Promise((done) => setTimeout(() => done({joined: path.join('a', 'b')}), 20))"
    )
    result = await execute_code("nodejs", code)
    assert result.stdout == "sum 3\n" and result.stderr == "warned\n"
    assert result.value == '{"joined":"a/b"}' and ran_cleanly(result)
    assert (await execute_code("nodejs", "'he' + 'llo'")).value == '"hello"'
    exited = await execute_code("nodejs", "process.exit(3)")
    assert exited.exit_code == 3 and exited.error == "exit code 3"


async def test_nodejs_errors_give_their_line_and_only_the_code_s_frames() -> None:
    thrown = await execute_code("nodejs", "let a = 1;\n\nnull.field;")
    assert thrown.error == "TypeError: Cannot read properties of null (reading 'field') (line 3)"
    assert thrown.exit_code == 1
    assert "node_boot" not in thrown.stderr and "(node:" not in thrown.stderr
    syntax = await execute_code("nodejs", "let a = ;")
    assert syntax.error is not None
    assert syntax.error.startswith("SyntaxError") and syntax.error.endswith("(line 1)")
    later = await execute_code("nodejs", "\nsetTimeout(() => { throw new RangeError('late') }, 5)")
    assert later.error == "RangeError: late (line 2)"
    rejected = await execute_code("nodejs", "Promise.reject(new Error('no'))")
    assert rejected.error == "Error: no (line 1)"


async def test_nodejs_endless_loop_and_memory_bomb_are_stopped() -> None:
    loop = await execute_code("nodejs", "for (;;) {}", limits=limits(wall_seconds=2))
    assert loop.limit == "wall_time" and loop.error == "stopped: the 2 s wall-time limit"
    bomb = await execute_code(
        "nodejs", "const keep = [];\nfor (;;) keep.push(new Array(100000).fill(7));"
    )
    assert bomb.limit == "memory"
    assert bomb.error is not None and bomb.error.startswith("stopped: the 256 MB memory limit")


async def test_nodejs_files_persist_in_the_run_s_scratch(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "node"
    wrote = await execute_code(
        "nodejs", "require('fs').writeFileSync('notes.txt', 'kept')", scratch=run
    )
    assert ran_cleanly(wrote) and [f.name for f in wrote.files] == ["notes.txt"]
    read = await execute_code(
        "nodejs", "require('fs').readFileSync('notes.txt', 'utf8')", scratch=run
    )
    assert read.value == '"kept"'
