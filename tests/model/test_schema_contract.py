"""``agentlens schema`` says what the importer refuses: the statuses it takes, and that ids are
not blank (the model itself stays lenient: the store's reads and capture go through it)."""

from __future__ import annotations

import re

from agentlens.ingest.trace_file import STATUSES
from agentlens.model import Step, StepKind, Trace


def test_the_schema_lists_the_importers_statuses() -> None:
    status = Trace.model_json_schema()["properties"]["status"]
    assert status["enum"] == list(STATUSES) and status["default"] == "ok"


def test_the_schema_says_ids_are_not_blank() -> None:
    doc = Trace.model_json_schema()
    for field in (doc["properties"]["id"], doc["$defs"]["Step"]["properties"]["id"]):
        assert field["minLength"] == 1
        pattern = re.compile(field["pattern"])
        assert pattern.search("run-1") and not pattern.search("  \t")


def test_the_model_still_takes_what_the_store_holds() -> None:
    step = Step(id=" ", kind=StepKind.TOOL)
    assert Trace(id=" ", status="cancelled", steps=[step]).status == "cancelled"
