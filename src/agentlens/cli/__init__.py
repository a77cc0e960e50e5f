"""The ``agentlens`` command line: one module per command group.

Every command takes the global ``--db URL`` before its name
(``agentlens --db sqlite:///x.db import f.jsonl``); listings take ``--json``.

A command's module registers it on :data:`app` when it is imported. :func:`main` imports only
the module of the command it runs (:data:`MODULES`; every module when the arguments name no
command, for the group's help); ``agentlens.cli.app`` is the app with every command registered.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from agentlens.cli._app import app

__all__ = ["MODULES", "app", "command_name", "main", "register"]

MODULES: dict[str, str] = {
    "delete": "_delete",
    "demo": "_demo",
    "import": "_io",
    "export": "_io",
    "migrate": "_migrate",
    "rate": "_rate",
    "gate": "_rate",
    "content": "_review",
    "review": "_review",
    "runs": "_runs",
    "show": "_runs",
    "schema": "_schema",
    "score": "_score",
    "serve": "_serve",
    "keys": "_serve",
    "worker": "_worker",
}
"""The module that registers each top-level command or group (``tests/cli/test_app.py`` holds
it to what the modules register)."""

_ORDER = tuple(sorted(set(MODULES.values())))
"""Every command module, in the order ``agentlens --help`` lists their commands."""


def main(argv: list[str] | None = None) -> None:
    """The console-script entry point (:func:`agentlens.cli._app.main`). Importing this module
    imports neither typer nor any command: a ``--workers`` child started by ``spawn`` imports
    the ``agentlens`` script's module again, and with it this one."""
    from agentlens.cli._app import main as run

    run(argv)


def command_name(args: list[str]) -> str | None:
    """The command (or group) that a command line without the program name runs, when only
    ``--db`` options come before it: ``None`` for anything else (``--help``, ``--version``, no
    command), which the whole app handles."""
    i = 0
    while i < len(args) and (args[i] == "--db" or args[i].startswith("--db=")):
        i += 1 if args[i].startswith("--db=") else 2
    return args[i] if i < len(args) and not args[i].startswith("-") else None


def register(args: list[str] | None = None) -> None:
    """Import the module of the command ``args`` names (a command line without the program
    name), or every command module when it names none of :data:`MODULES`."""
    name = command_name(args) if args is not None else None
    module = MODULES.get(name) if name is not None else None
    for each in (module,) if module is not None else _ORDER:
        importlib.import_module(f"agentlens.cli.{each}")


def __getattr__(name: str) -> Any:
    if name == "app":
        register()
        from agentlens.cli._app import app

        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
