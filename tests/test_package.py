"""The package surface: a complete, sorted ``__all__``, a light import, and the layering."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentlens
from _layering import import_cycles, layering_problems

SRC = Path(agentlens.__file__).parents[1]
"""The folder that holds ``agentlens/`` (``src/``)."""


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


def test_layers_point_one_way() -> None:
    assert layering_problems(SRC) == []


# every subpackage, found on disk: none can be left out
@pytest.mark.parametrize(
    "package",
    sorted(p.name for p in (SRC / "agentlens").iterdir() if (p / "__init__.py").is_file()),
)
def test_no_import_cycle_inside_a_package(package: str) -> None:
    assert import_cycles(SRC, f"agentlens.{package}") == []


# -- the check must not be fooled: mutants of a copy of the source tree -----------------------


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pristine copy of ``src/agentlens`` (each mutant test copies it again)."""
    dest = tmp_path_factory.mktemp("pristine") / "src"
    shutil.copytree(SRC / "agentlens", dest / "agentlens", ignore=shutil.ignore_patterns("*.pyc"))
    return dest


def _mutant(tree_copy: Path, tmp_path: Path, relpath: str, code: str) -> Path:
    src = tmp_path / "src"
    shutil.copytree(tree_copy, src)
    path = src / "agentlens" / relpath
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(before + "\n" + textwrap.dedent(code), encoding="utf-8")
    return src


def test_the_pristine_copy_passes(tree_copy: Path) -> None:
    assert layering_problems(tree_copy) == []


@pytest.mark.parametrize(
    ("relpath", "code", "expected"),
    [
        pytest.param(
            "capture/_run.py",
            """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from agentlens.eval import Scorer
            from agentlens.eval import run_scorers
            """,
            "capture/_run.py imports ['eval']",
            id="runtime-back-import-beside-a-type-only-one",
        ),
        pytest.param(
            "store/_sqlite.py",
            """
            import typing
            if typing.TYPE_CHECKING:
                pass
            else:
                from agentlens import eval
            """,
            "store/_sqlite.py imports ['eval']",
            id="else-branch-of-type-checking-runs",
        ),
        pytest.param(
            "config.py",
            """
            def _later():
                from agentlens.store import open_store
                return open_store
            """,
            "config.py imports ['store']",
            id="root-module-lazy-import",
        ),
        pytest.param(
            "errors.py", "import agentlens.capture\n", "errors.py imports ['capture']", id="root"
        ),
        pytest.param(
            "model/_trace.py",
            "from ..capture import run\n",
            "model/_trace.py imports ['capture']",
            id="relative-import",
        ),
        pytest.param(
            "store/_api.py",
            "from agentlens import configure\n",
            "store/_api.py imports ['__init__']",
            id="through-the-top-level",
        ),
        pytest.param(
            "_new.py",
            "X = 1\n",
            "_new.py: unit '_new' has no place in the layering table",
            id="new-root-module",
        ),
        pytest.param(
            "analytics/_rate.py",
            "try:\n    import agentlens.cli\nexcept ImportError:\n    pass\n",
            "analytics/_rate.py imports ['cli']",
            id="inside-try",
        ),
    ],
)
def test_a_mutant_is_caught(
    tree_copy: Path, tmp_path: Path, relpath: str, code: str, expected: str
) -> None:
    src = _mutant(tree_copy, tmp_path, relpath, code)
    assert f"agentlens/{expected}" in layering_problems(src)


def test_a_type_only_import_is_allowed(tree_copy: Path, tmp_path: Path) -> None:
    src = _mutant(
        tree_copy,
        tmp_path,
        "capture/_run.py",
        """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from agentlens.eval import Scorer
        """,
    )
    assert layering_problems(src) == []


def test_a_lazy_import_that_closes_a_loop_is_a_cycle(tree_copy: Path, tmp_path: Path) -> None:
    src = _mutant(
        tree_copy,
        tmp_path,
        "capture/_export.py",
        """
        def _later():
            from agentlens.capture._run import Run
            return Run
        """,
    )
    cycles = import_cycles(src, "agentlens.capture")
    assert cycles and all(c[0] == c[-1] for c in cycles)
    assert any({"agentlens.capture._export", "agentlens.capture._run"} <= set(c) for c in cycles)
