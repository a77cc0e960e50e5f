"""The verdict cache: in memory, and optionally in a SQLite file shared between runs.

A verdict is keyed by the hash of (backend, model, prompt version, claim, evidence): a changed
prompt or model never reuses an old verdict. Only decided verdicts (``supported`` /
``unsupported``) are cached; an ``unverifiable`` one (a failure) is asked again next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from agentlens.eval.judges._protocol import ClaimVerdict, EvidenceSpan, Label

__all__ = ["VerdictCache", "cache_key", "default_cache_path", "evidence_digest"]


def default_cache_path() -> Path:
    """``$XDG_CACHE_HOME/agentlens/judge.sqlite`` (``~/.cache/agentlens/judge.sqlite``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentlens" / "judge.sqlite"


def evidence_digest(evidence_text: str) -> str:
    """A stable digest of the evidence as the judge saw it."""
    return hashlib.sha256(evidence_text.encode("utf-8", "surrogatepass")).hexdigest()


def cache_key(backend: str, model: str, prompt_version: str, claim: str, evidence: str) -> str:
    """The cache key of one verdict (``evidence`` is the evidence digest)."""
    blob = json.dumps([backend, model, prompt_version, claim, evidence], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class VerdictCache:
    """An LRU cache in memory, backed by an optional SQLite file.

    Args:
        path: the SQLite file; ``None`` keeps the cache in memory only.
        max_items: how many verdicts to keep in memory.
    """

    def __init__(self, path: str | Path | None = None, *, max_items: int = 50_000) -> None:
        self.path = Path(path) if path is not None else None
        self.max_items = max_items
        self._memory: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=10)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS verdicts ("
                "key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at REAL NOT NULL)"
            )
            self._db.commit()

    def get(self, key: str) -> ClaimVerdict | None:
        """The cached verdict, or ``None``."""
        with self._lock:
            data = self._memory.get(key)
            if data is not None:
                self._memory.move_to_end(key)
            elif self._db is not None:
                row = self._db.execute(
                    "SELECT value FROM verdicts WHERE key = ?", (key,)
                ).fetchone()
                if row is not None:
                    data = json.loads(row[0])
                    self._remember(key, data)
            if data is None:
                self.misses += 1
                return None
            self.hits += 1
        span = data.get("span")
        return ClaimVerdict(
            label=Label(data["label"]),
            confidence=float(data["confidence"]),
            reason=str(data["reason"]),
            evidence_span=EvidenceSpan(*span) if span else None,
            judge=str(data.get("judge", "")),
            cached=True,
        )

    def put(self, key: str, verdict: ClaimVerdict) -> None:
        """Cache a decided verdict; ``unverifiable`` verdicts are not cached."""
        if verdict.label is Label.UNVERIFIABLE:
            return
        span = verdict.evidence_span
        data = {
            "label": str(verdict.label),
            "confidence": verdict.confidence,
            "reason": verdict.reason,
            "span": [span.source, span.start, span.end, span.text] if span else None,
            "judge": verdict.judge,
        }
        with self._lock:
            self._remember(key, data)
            if self._db is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO verdicts (key, value, created_at) VALUES (?, ?, ?)",
                    (key, json.dumps(data, ensure_ascii=False), time.time()),
                )
                self._db.commit()

    def _remember(self, key: str, data: dict[str, Any]) -> None:
        self._memory[key] = data
        self._memory.move_to_end(key)
        while len(self._memory) > self.max_items:
            self._memory.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            if self._db is not None:
                return int(self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
            return len(self._memory)

    def close(self) -> None:
        """Close the SQLite file (the in-memory part stays usable)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
