"""The environment in which the CLI tests run the real ``agentlens`` command as a subprocess:
this checkout's source first on the path, no user configuration, no terminal or debug settings
from the shell that runs the tests."""

from __future__ import annotations

import os
from pathlib import Path

import agentlens

SRC = str(Path(agentlens.__file__).resolve().parents[1])
"""The folder holding this checkout's ``agentlens`` package."""


def cli_env(home: Path) -> dict[str, str]:
    """``os.environ`` with :data:`SRC` first on ``PYTHONPATH``, ``HOME`` at ``home`` (no user
    configuration), and the variables that change what the CLI prints unset."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env["HOME"] = str(home)
    for name in ("AGENTLENS_DEBUG", "AGENTLENS_DB", "COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)
    return env
