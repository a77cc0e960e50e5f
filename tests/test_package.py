"""The package surface: a complete, sorted ``__all__``, a light import, and the layering."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agentlens

SRC = Path(agentlens.__file__).parent

# DESIGN.md: model <- capture, ingest, store <- eval <- analytics, review <- server, cli.
# Each layer may import only the layers listed for it (plus the leaf modules errors, config, _ids).
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "capture": {"model", "store"},
    # agentlens.integrations only re-exports agentlens.capture.integrations under a short name
    "integrations": {"capture"},
    "ingest": {"model"},
    "store": {"model"},
    "eval": {"model", "store"},
    "analytics": {"model", "store", "eval"},
    "review": {"model", "store", "eval", "analytics"},
    # `agentlens serve` starts the server: the CLI is the one thing above it.
    "cli": {"model", "capture", "ingest", "store", "eval", "analytics", "review", "server"},
    "server": {"model", "capture", "ingest", "store", "eval", "analytics", "review"},
}
LEAVES = {"errors", "config", "_ids", "testing"}


def test_all_is_sorted_and_complete() -> None:
    assert agentlens.__all__ == sorted(agentlens.__all__)
    assert set(agentlens.__all__) == {*agentlens._EXPORTS, "__version__"}
    for name in agentlens.__all__:
        assert getattr(agentlens, name) is not None, name


def test_import_is_light() -> None:
    code = (
        "import sys, agentlens; "
        "heavy = [m for m in ('httpx', 'sqlite3', 'typer', 'rich', 'opentelemetry', 'agentlens.store',"
        " 'agentlens.eval', 'agentlens.cli') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "agentlens" and len(parts) > 1:
                found.add(parts[1])
    return found


def _type_checking_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom) and sub.module:
                    parts = sub.module.split(".")
                    if parts[0] == "agentlens" and len(parts) > 1:
                        found.add(parts[1])
    return found


def test_layers_point_one_way() -> None:
    problems = []
    for layer, allowed in ALLOWED.items():
        folder = SRC / layer
        if not folder.is_dir():
            continue
        for path in folder.rglob("*.py"):
            used = _imports(path) - _type_checking_imports(path)
            bad = used - allowed - LEAVES - {layer}
            if bad:
                problems.append(f"{path.relative_to(SRC)} imports {sorted(bad)}")
    assert problems == []
