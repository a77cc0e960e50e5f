"""The import-layering check behind ``tests/test_package.py``, as functions a mutant test can run
on a copy of the source tree.

A *unit* is a top-level subpackage (``capture``) or root module (``config``; the package's own
``__init__`` is ``__init__``). Every import that runs is counted: at module level, inside
functions (a lazy import is still a runtime dependency), in ``try`` and ``else`` branches.
Only the body of ``if TYPE_CHECKING:`` (or ``if typing.TYPE_CHECKING:``) is skipped; its
``else`` branch runs and is counted.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

# DESIGN.md: model <- capture, ingest, store <- eval <- analytics, review <- server, cli.
# What each unit may import at run time, besides itself. There is no list of exceptions.
_BASE = {"_ids", "errors", "config"}
ALLOWED: dict[str, set[str]] = {
    # the top level loads everything lazily, by name; it registers the implicit exporter
    "__init__": {"_implicit"},
    "_ids": set(),
    "_implicit": set(),  # a leaf: the hook capture's implicit configuration reads
    "errors": set(),
    "config": {"_ids", "errors"},
    "model": {"_ids", "errors"},
    "capture": _BASE | {"_implicit", "model", "store"},
    # agentlens.integrations only re-exports agentlens.capture.integrations under a short name
    "integrations": _BASE | {"capture"},
    "ingest": _BASE | {"model"},
    "store": _BASE | {"model"},
    "eval": _BASE | {"model", "store"},
    "analytics": _BASE | {"model", "store", "eval"},
    "review": _BASE | {"model", "store", "eval", "analytics"},
    "testing": _BASE | {"__init__", "model", "capture", "store", "eval", "analytics", "review"},
    # agentlens.configure: capture's configuration joined with review on completion, above both
    "_oncomplete": _BASE | {"model", "capture", "store", "eval", "analytics", "review"},
    # the web dashboard: pages over the read APIs below it; the server mounts it and hands it
    # its key checker and project views, so it never imports the server
    "dashboard": _BASE | {"model", "store", "eval", "analytics", "review"},
    "server": _BASE
    | {"__init__", "model", "capture", "ingest", "store", "eval", "analytics", "review"}
    | {"dashboard"},
    "__main__": {"cli"},  # python -m agentlens runs the CLI
    "cli": _BASE
    | {"__init__", "model", "capture", "ingest", "store", "eval", "analytics", "review", "server"},
}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_name(src: Path, path: Path) -> str:
    """``agentlens.capture._run`` for ``src/agentlens/capture/_run.py`` (``src`` holds
    ``agentlens/``)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class _Imports(ast.NodeVisitor):
    """Absolute names of everything a module imports at run time (``from a import b`` gives
    ``a.b``, which is ``a``'s attribute or its submodule)."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[str] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:  # the else branch runs
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.extend(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        if module != "agentlens":  # ``from agentlens import x`` depends on x, named below
            self.found.append(module)
        self.found.extend(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")


def runtime_imports(src: Path, path: Path) -> list[str]:
    """Every module name ``path`` imports when it runs (TYPE_CHECKING bodies skipped)."""
    visitor = _Imports(module_name(src, path), path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
    return visitor.found


def unit_of(name: str, known: set[str]) -> str | None:
    """The unit a module name belongs to, or ``None`` outside the package. A name under
    ``agentlens`` that is no unit (``agentlens.configure``) is reached through the top level."""
    parts = name.split(".")
    if parts[0] != "agentlens":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in known else "__init__"


def units(src: Path) -> Iterator[tuple[str, Path]]:
    """Every source file of the package with its unit."""
    root = src / "agentlens"
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        yield (rel.parts[0] if len(rel.parts) > 1 else rel.stem), path


def layering_problems(src: Path) -> list[str]:
    """One line per import that goes against :data:`ALLOWED`, or from a unit it does not
    know (a new subpackage or root module must be placed in the table)."""
    problems = []
    known = {unit for unit, _ in units(src)}
    for unit, path in units(src):
        allowed = ALLOWED.get(unit)
        where = path.relative_to(src)
        if allowed is None:
            problems.append(f"{where}: unit {unit!r} has no place in the layering table")
            continue
        bad = set()
        for name in runtime_imports(src, path):
            target = unit_of(name, known)
            if target is not None and target != unit and target not in allowed:
                bad.add(target)
        if bad:
            problems.append(f"{where} imports {sorted(bad)}")
    return problems


def _resolve(name: str, modules: set[str]) -> str | None:
    """The module ``name`` loads: itself if it is one, else its parent (an attribute)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_cycles(src: Path, package: str) -> list[list[str]]:
    """Cycles among the modules of ``package`` (``agentlens.eval``) through their run-time
    imports, function-level ones included: a lazy import that closes a loop is still two modules
    that need each other (what lets a registry fill itself as a side effect of an import)."""
    root = src / Path(*package.split("."))
    paths = {module_name(src, p): p for p in root.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        visitor = _Imports(module, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        edges = set()
        for name in visitor.found:
            target = _resolve(name, modules)
            if target is not None and target != module:
                edges.add(target)
        # a submodule's own package is already being loaded when the submodule runs: an
        # import of a sibling through it reaches the sibling, which the names above resolve
        graph[module] = {t for t in edges if not module.startswith(t + ".")}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles
