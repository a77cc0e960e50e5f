"""The entry point: user errors and internal errors are one line; no traceback."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from agentlens.cli import _app
from agentlens.cli._app import main
from agentlens.errors import ConfigError


@pytest.fixture
def broken_command() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def explode(kind: str) -> None:
        if kind == "user":
            raise ConfigError("agentlens.toml: unknown key 'x'")
        raise RuntimeError("a bug")

    return app


def test_internal_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], broken_command: typer.Typer
) -> None:
    monkeypatch.setattr(_app, "app", broken_command)
    monkeypatch.delenv("AGENTLENS_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["bug"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("error: internal error: RuntimeError: a bug")
    assert len(err.strip().splitlines()) <= 2  # one line, maybe wrapped by the console


def test_user_errors_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], broken_command: typer.Typer
) -> None:
    monkeypatch.setattr(_app, "app", broken_command)
    with pytest.raises(SystemExit) as info:
        main(["user"])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == "error: agentlens.toml: unknown key 'x'"


def test_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch, broken_command: typer.Typer
) -> None:
    monkeypatch.setattr(_app, "app", broken_command)
    monkeypatch.setenv("AGENTLENS_DEBUG", "1")
    with pytest.raises(RuntimeError, match="a bug"):
        main(["bug"])


# -- one command's module, one command's click object (start-up) -------------------------------


def _paths(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group of ``group``, as the arguments that name it."""
    found = []
    for info in group.registered_commands:
        found.append((*prefix, _app._entry_name(info)))
    for sub in group.registered_groups:
        name = _app._entry_name(sub)
        found.append((*prefix, name))
        assert sub.typer_instance is not None
        found += _paths(sub.typer_instance, (*prefix, name))
    return found  # type: ignore[return-value]


def _full_app() -> typer.Typer:
    from agentlens import cli

    return cli.app


def test_entry_names_are_the_names_typer_gives() -> None:
    import typer.main

    group = typer.main.get_command(_full_app())
    assert isinstance(group, typer.core.TyperGroup)
    names = [_app._entry_name(e) for e in _full_app().registered_commands]
    names += [_app._entry_name(e) for e in _full_app().registered_groups]
    assert sorted(names) == sorted(group.commands)  # type: ignore[type-var]


def test_every_command_has_its_module() -> None:
    from agentlens import cli

    top = {p[0] for p in _paths(_full_app())}
    assert set(cli.MODULES) == top
    for name, module in cli.MODULES.items():
        code = (
            "from agentlens import cli; from agentlens.cli import _app; "
            f"cli.register([{name!r}]); "
            "print(sorted(_app._entry_name(e) for e in "
            "[*_app.app.registered_commands, *_app.app.registered_groups]))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert name in ast.literal_eval(out.stdout), (name, module)
    assert set(cli.MODULES.values()) <= set(cli._ORDER)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["score"], "score"),
        (["--db", "x.db", "score", "--json"], "score"),
        (["--db=x.db", "review", "queue"], "review"),
        (["--db", "--help", "runs"], "runs"),  # click takes --help as the store, too
        (["--db", "a", "--db", "b", "show", "r1"], "show"),
        (["--help", "score"], None),
        (["--version", "score"], None),
        (["--db"], None),
        ([], None),
        (["-x", "score"], None),
    ],
)
def test_command_name(args: list[str], name: str | None) -> None:
    assert _app.command_name(args) == name


def _invoked(app: typer.Typer, args: list[str]) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, args, prog_name="agentlens")
    return result.exit_code, result.stdout, result.stderr


def test_one_command_app_answers_as_the_whole_app(tmp_path: Path) -> None:
    """The help and the usage errors of every command, group and subcommand, through the app
    main() builds for the arguments and through the app with every command."""
    db = str(tmp_path / "x.db")
    paths = _paths(_full_app())
    assert len(paths) >= 20
    for path in paths:
        for args in (
            [*path, "--help"],
            ["--db", db, *path, "--help"],
            [f"--db={db}", *path, "--help"],
            [*path, "--no-such-option"],
            [*path, "no-such-command", "--help"],
        ):
            reduced = _app._app_for(args)
            if path[0] in ("score", "review", "runs"):
                assert reduced is not _full_app(), args  # the fast path is taken
            assert _invoked(reduced, args) == _invoked(_full_app(), args), args


def test_the_whole_app_for_anything_else() -> None:
    for args in ([], ["--help"], ["--version"], ["no-such-command"], ["--help", "score"]):
        assert _app._app_for(args) is _full_app(), args


def _imported_after(
    code: str, modules: tuple[str, ...]
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``, and the
    process (its output; the list is its last line)."""
    script = f"{code}import sys\nprint([m for m in {modules!r} if m in sys.modules])\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1]), out


def test_help_imports_no_model_store_or_rich() -> None:
    # (typer itself may import pydantic for a command's option types)
    code = (
        "import sys\n"
        "from agentlens.cli import main\n"
        "for args in (['--help'], ['score', '--help'], ['runs', '--help'], ['show', '--help']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
    )
    heavy = ("rich", "agentlens.model", "agentlens.store", "agentlens.eval")
    assert _imported_after(code, heavy)[0] == []


def test_the_lazy_console_is_a_console() -> None:
    from rich.console import Console

    console = _app._LazyConsole(stderr=True, highlight=False)
    real = _app.real_console(console)  # type: ignore[arg-type]
    assert isinstance(real, Console) and real.stderr
    assert _app.real_console(console) is real  # made once  # type: ignore[arg-type]
    console._force_terminal = True
    assert real._force_terminal is True and console.is_terminal
    assert _app.real_console(real) is real


def test_score_imports_no_judge_nor_asyncio(tmp_path: Path) -> None:
    # the five default scorers need no judge, no event loop and no worker processes
    code = (
        "import sys\n"
        "from agentlens.cli import main\n"
        "try:\n"
        f"    main(['--db', {str(tmp_path / 'x.db')!r}, 'score'])\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    heavy = ("agentlens.eval.judges", "agentlens.eval._claims", "asyncio", "multiprocessing")
    loaded, out = _imported_after(code, heavy)
    assert loaded == []
    assert "nothing to score" in out.stderr + out.stdout


def test_importing_the_cli_imports_no_command() -> None:
    # `from agentlens.cli import main` (a script, a spawned worker importing it again) is light
    heavy = ("typer", "rich", "agentlens.cli._app", "agentlens.model")
    loaded, out = _imported_after("import agentlens.cli\n", heavy)
    assert loaded == [] and out.stdout.strip() == "[]"  # and the import printed nothing
