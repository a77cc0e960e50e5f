"""The ``agentlens`` command line: one module per command group.

Every command takes the global ``--db URL`` before its name
(``agentlens --db sqlite:///x.db import f.jsonl``); listings take ``--json``.
"""

from agentlens.cli import (  # noqa: F401  (each registers its commands)
    _delete,
    _demo,
    _io,
    _rate,
    _review,
    _runs,
    _schema,
    _score,
    _serve,
)
from agentlens.cli._app import app, main

__all__ = ["app", "main"]
