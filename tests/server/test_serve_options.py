"""``agentlens serve``'s numeric options refuse values that make no sense (a body of -5 bytes at
most, a trace idle for -1 seconds) with an error naming the option, before anything starts;
``ServerConfig`` (the Python API's options) refuses them with a ConfigError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _process import SRC, free_port

from agentlens.errors import ConfigError
from agentlens.server import ServerConfig, create_app


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--max-body", "-5", "1"),  # at least 1 (worded by the CLI's usage errors)
        ("--max-body", "0", "1"),
        ("--idle-timeout", "-1", "-1 is not a number of seconds greater than 0"),
        ("--idle-timeout", "0", "0 is not a number of seconds greater than 0"),
        ("--idle-timeout", "nan", "nan is not a number of seconds greater than 0"),
        ("--idle-timeout", "inf", "inf is not a number of seconds greater than 0"),
        ("--port", "-1", "--port -1: not a port number"),
        ("--port", "65536", "--port 65536: not a port number"),
    ],
)
def test_serve_refuses_a_nonsense_value(tmp_path: Path, option: str, value: str, says: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    args = ["--port", str(free_port())] if option != "--port" else []
    try:
        result = subprocess.run(
            [sys.executable, "-c", "from agentlens.cli import main; main()",
             "--db", f"sqlite:///{tmp_path / 'opt.db'}", "serve", *args, f"{option}={value}"],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"agentlens serve {option} {value} was accepted: the server ran")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "serving on" not in result.stdout
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert option in last and says in last, result.stderr


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_body_bytes", -5),
        ("max_body_bytes", 0),
        ("max_body_bytes", 1.5),
        ("max_pending_spans", 0),
        ("idle_timeout_s", -1.0),
        ("idle_timeout_s", 0),
        ("idle_timeout_s", float("nan")),
        ("idle_timeout_s", float("inf")),
        ("retention_s", -1.0),
        ("retention_s", float("nan")),
    ],
)
def test_server_config_refuses_a_nonsense_value(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"^{field} "):
        ServerConfig(**{field: value})  # type: ignore[arg-type]


def test_server_config_takes_the_least_sensible_values(tmp_path: Path) -> None:
    config = ServerConfig(max_body_bytes=1, max_pending_spans=1, idle_timeout_s=0.001,
                          retention_s=0)  # fmt: skip
    assert config.max_body_bytes == 1
    with pytest.raises(ConfigError, match=r"^max_body_bytes -5: "):
        create_app(f"sqlite:///{tmp_path / 'cfg.db'}", max_body_bytes=-5)
