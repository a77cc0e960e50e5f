"""A usage error (a bad option value, a missing or unknown option, argument or command) prints
exactly one line, ``error: ...``, naming the option, and exits 2 (docs/cli.md, Conventions):
not click's usage, hint and ``Error:`` lines, and not the validation library's phrasing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner, Result

import agentlens
from agentlens.cli import _app

Invoke = Callable[..., Result]

_BY = "'day', 'week', 'agent', 'mode', 'release', 'scorer_version'"

CASES = [
    (["runs", "--limit", "abc"], "error: --limit: 'abc' is not an integer"),
    (["runs", "-n", "abc"], "error: --limit: 'abc' is not an integer"),
    (["runs", "--limit", "1.5"], "error: --limit: '1.5' is not an integer"),
    (["review", "queue", "--limit", "x"], "error: --limit: 'x' is not an integer"),
    (["rate", "--by", "month"], f"error: --by: 'month' is not one of {_BY}"),
    (["export", "--limit", "-1"], "error: --limit: must be at least 1, not -1"),
    (["score", "--workers", "0"], "error: --workers: must be at least 1, not 0"),
    (["runs", "--limit", "-3"], "error: --limit: must be at least 0, not -3"),
    (["show"], "error: missing argument 'RUN_ID'"),
    (["review", "verdict"], "error: missing argument 'RUN_ID'"),
    (["show", "a", "b"], "error: unexpected extra argument(s): b"),
    (["runs", "--nosuch"], "error: no such option: --nosuch"),
    (["--nosuch", "runs"], "error: no such option: --nosuch"),
    (["runs", "--limt", "3"], "error: no such option: --limt (possible options: --limit, --to)"),
    (["review", "queue", "--limit"], "error: option '--limit' requires an argument"),
    (["runs", "--flagged=yes"], "error: option '--flagged' does not take a value"),
    (["rnus"], "error: no such command 'rnus'; did you mean 'runs'?"),
    (["nosuch"], "error: no such command 'nosuch' (`agentlens --help` lists the commands)"),
    (
        ["review", "nosuch"],
        "error: no such command 'nosuch' (`agentlens review --help` lists the commands)",
    ),
]

_CLICK_WORDING = ("Usage:", "Try '", "Error:", "Invalid value", "Input should be", "Value error")


def _one_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert not any(words in result.stderr for words in _CLICK_WORDING), result.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "line"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_usage_error_is_one_line(cli: Invoke, args: list[str], line: str) -> None:
    assert _one_line(cli(*args)) == line


def test_a_missing_required_option_is_one_line() -> None:
    # no agentlens command has a required option today: a command of the same group has
    app = typer.Typer(
        cls=_app._Group, name="agentlens", add_completion=False, rich_markup_mode=None
    )

    @app.command()
    def ship(
        to: Annotated[str, typer.Option("--to", "-t", metavar="WHERE")],
        count: Annotated[int, typer.Option("--count", min=1, max=9)] = 1,
    ) -> None:
        print(f"{count} to {to}")

    @app.command()
    def other() -> None:  # two commands: a group
        pass

    runner = CliRunner()
    assert _one_line(runner.invoke(app, ["ship"])) == "error: missing option '--to'"
    assert _one_line(runner.invoke(app, ["ship", "-t", "x", "--count", "10"])) == (
        "error: --count: must be at most 9, not 10"
    )
    ok = runner.invoke(app, ["ship", "-t", "x", "--count", "3"])
    assert ok.exit_code == 0 and ok.stdout == "3 to x\n"


def test_help_is_unchanged(cli: Invoke) -> None:
    result = cli("runs", "--help")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: agentlens runs [OPTIONS]")
    assert "--limit" in result.stdout and "error:" not in result.stdout
    group = cli("--help")
    assert group.exit_code == 0 and "Commands" in group.stdout
    bare = CliRunner().invoke(_app.app, ["review"])  # a group alone prints its help
    assert "Usage: agentlens review" in bare.output and "queue" in bare.output
    assert "error:" not in bare.output


def test_the_console_script_prints_one_line(tmp_path: Path) -> None:
    env = dict(os.environ)
    src = str(Path(agentlens.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("AGENTLENS_DEBUG", None)
    code = "import sys; sys.argv[0] = 'agentlens'; from agentlens.__main__ import main; main()"
    db = f"sqlite:///{tmp_path / 's.db'}"
    for args, line in [*CASES[:3], CASES[4], CASES[8]]:
        proc = subprocess.run(
            [sys.executable, "-c", code, "--db", db, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        assert proc.stderr == line + "\n"


@pytest.mark.parametrize(
    ("message", "plain"),
    [
        ("Input should be a valid date", "must be a valid date"),
        ("Value error, 'x' is not one of 'a', 'b'", "'x' is not one of 'a', 'b'"),
        (
            "No such command 'rnus'. Did you mean 'runs'?",
            "no such command 'rnus'; did you mean 'runs'?",
        ),
        ("Missing argument 'RUN_ID'.", "missing argument 'RUN_ID'"),
        ("RUN_ID is odd.", "RUN_ID is odd"),
    ],
)
def test_click_and_pydantic_wording_made_plain(message: str, plain: str) -> None:
    assert _app._plain(message) == plain
