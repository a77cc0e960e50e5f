"""Converters from files into the trace model, one module per format.

Every format module defines ``read(path: Path) -> Iterator[Trace]``: it streams the file (never
loading a large file whole), yields runs in file order, and raises
:class:`agentlens.errors.FormatError` naming the file, line and field of the first bad record.
``agentlens import --format NAME`` picks the module from :data:`FORMATS`; without ``--format``,
:func:`detect` tells the format from the file's content.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path

from agentlens.errors import ConfigError
from agentlens.ingest._detect import DETECTABLE, detect
from agentlens.model import Trace

__all__ = ["DETECTABLE", "FORMATS", "detect", "get_reader"]

FORMATS: dict[str, str] = {
    "trace": "agentlens.ingest.trace_file",
    "transcript": "agentlens.ingest.transcript",
    "openai": "agentlens.ingest.openai_messages",
    "swe-agent": "agentlens.ingest.swe_agent",
    "openhands": "agentlens.ingest.openhands",
    "who-and-when": "agentlens.ingest.who_and_when",
    "claude-code": "agentlens.ingest.claude_code",
    "otlp-json": "agentlens.ingest.otlp",
}
"""Format name -> module defining ``read(path)``. ``trace`` is agentlens's own format."""


def get_reader(name: str) -> Callable[[Path], Iterator[Trace]]:
    """The ``read`` function of format ``name``.

    Raises:
        ConfigError: the format is unknown (the message lists the known ones).
    """
    module = FORMATS.get(name)
    if module is None:
        raise ConfigError(f"unknown format {name!r}; known formats: {', '.join(sorted(FORMATS))}")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise ConfigError(f"{name} importer not available in this version") from None
        raise
    reader: Callable[[Path], Iterator[Trace]] | None = getattr(mod, "read", None)
    if reader is None:
        raise ConfigError(f"{name} importer not available in this version")
    return reader
