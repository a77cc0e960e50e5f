"""The checks' regular expressions match alike on every Python agentlens supports.

Python 3.11.0 to 3.11.4 mis-match a possessive repeat (``*+``, ``++``, ``?+``, ``{m,n}+``) of
a part longer than one character that holds a look-around or backtracking (CPython gh-106052,
fixed in 3.11.5): ``(?:-(?!x)\\w)*+-\\w+`` does not match ``-x1y`` there. The id shape was written
so, and on Debian 12's Python (3.11.2) ``no_fabricated_refs`` found no id at all. Such repeats
are written as atomic groups instead (``(?>(?:X)*)`` is what ``(?:X)*+`` means), which those
versions match right; a possessive repeat of one character (``[0-9]++``) is matched right by
all of them, and is kept where it is (it is faster than the atomic group). This test keeps it
so: it parses every compiled expression that agentlens' modules hold and fails on a possessive
repeat of anything but one character.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from typing import Any

import pytest

import agentlens
from agentlens.eval._references import _BUILTIN, get_extractor
from agentlens.eval._volatile import _TEXT, VOLATILE_PARTS, masker

_parser = pytest.importorskip("re._parser")
_constants = pytest.importorskip("re._constants")

_ONE_CHARACTER = {
    _constants.LITERAL,
    _constants.NOT_LITERAL,
    _constants.IN,
    _constants.ANY,
    _constants.CATEGORY,
}


def _ops(tree: Any) -> Iterator[Any]:
    """Every opcode of a parsed expression, nested ones included; a possessive repeat of one
    character is given as ``"one"``, of anything longer as ``"many"``."""
    for op, av in tree:
        yield op
        if op is _constants.POSSESSIVE_REPEAT:
            body = list(av[2])
            yield "one" if len(body) == 1 and body[0][0] in _ONE_CHARACTER else "many"
        if op in (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT):
            yield from _ops(av[2])
        elif op is _constants.SUBPATTERN:
            yield from _ops(av[-1])
        elif op is _constants.ATOMIC_GROUP:
            yield from _ops(av)
        elif op in (_constants.ASSERT, _constants.ASSERT_NOT):
            yield from _ops(av[1])
        elif op is _constants.BRANCH:
            for branch in av[1]:
                yield from _ops(branch)
        elif op is _constants.GROUPREF_EXISTS:
            yield from _ops(av[1])
            if av[2]:
                yield from _ops(av[2])


def _patterns(value: Any, where: str, found: dict[str, re.Pattern[Any]], depth: int = 0) -> None:
    """The compiled expressions in ``value``: itself, in its containers and in the attributes
    of agentlens' own objects, a few levels down."""
    if isinstance(value, re.Pattern):
        found.setdefault(where, value)
    elif depth >= 3:
        return
    elif isinstance(value, dict):
        for k, v in value.items():
            _patterns(v, f"{where}[{k!r}]", found, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for i, v in enumerate(value):
            _patterns(v, f"{where}[{i}]", found, depth + 1)
    elif type(value).__module__.startswith("agentlens.") and not isinstance(value, type):
        names = list(getattr(value, "__dict__", {})) + list(getattr(type(value), "__slots__", ()))
        for name in names:
            if hasattr(value, name):
                _patterns(getattr(value, name), f"{where}.{name}", found, depth + 1)


def _all_patterns() -> dict[str, re.Pattern[Any]]:
    found: dict[str, re.Pattern[Any]] = {}
    for info in pkgutil.walk_packages(agentlens.__path__, "agentlens."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            _patterns(value, f"{info.name}.{name}", found)
    # the expressions built when a scorer is made: the extractor's scans, the masker's parts
    _patterns(get_extractor(None, None), "get_extractor()", found)
    _patterns(masker(VOLATILE_PARTS), "masker()", found)
    for table, texts in (("_BUILTIN", _BUILTIN), ("_TEXT", _TEXT)):
        for name, text in texts.items():
            found[f"{table}[{name!r}]"] = re.compile(text)
    return found


def _possessive_of_many(p: re.Pattern[Any]) -> bool:
    return "many" in set(_ops(_parser.parse(p.pattern, p.flags)))


def test_no_expression_repeats_a_longer_part_possessively() -> None:
    patterns = _all_patterns()
    assert len(patterns) > 100  # the walk reaches the checks' expressions
    assert any(w.startswith("get_extractor()") for w in patterns)
    possessive = [where for where, p in patterns.items() if _possessive_of_many(p)]
    assert possessive == [], (
        "Python 3.11.0-3.11.4 mis-match a possessive repeat of a longer part: write (?:X)*+ as"
        " (?>(?:X)*)"
    )


def test_the_check_tells_a_possessive_repeat_of_a_longer_part() -> None:
    """Found however deep it is; one character repeated possessively, or an atomic group, is
    not one."""
    for text in (r"(?:ab)*+", r"(?:-(?!x)\w)*+-\w+", r"(?>(?:a|(?:bc)++))", r"(?=(?:xy){2,}+)"):
        assert _possessive_of_many(re.compile(text)), text
    for text in (r"a*+", r"[0-9]++\.\w?+", r"(?>(?:-(?!x)\w)*)-\w+", r"(?=[^\s]{0,8}+x)"):
        assert not _possessive_of_many(re.compile(text)), text
    assert any("one" in _ops(_parser.parse(p.pattern, p.flags)) for p in _all_patterns().values())


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Customer CUST-05306 paid INV-9431.", ["id", "id"]),
        ("Order ORD-139148, code ABV732, see [DOC-aef9c00b].", ["id", "code", "citation"]),
        ("ticket a-x1y, TKT-2024-0042, ord_8f3k2 and user-b7x9", ["id", "id", "id", "id"]),
    ],
)
def test_ids_are_found_on_this_python(text: str, kinds: list[str]) -> None:
    """What Python 3.11.2 got wrong with the possessive form of the id shape."""
    assert [r.kind for r in get_extractor(None, None).extract(text)] == kinds
