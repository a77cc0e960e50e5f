"""``agentlens schema``: the JSON Schema of the trace format."""

from __future__ import annotations

import json

from agentlens.cli._app import app, out_console
from agentlens.cli._util import command


@command(app)
def schema() -> None:
    """Print the JSON Schema of the trace format (schema version 1)."""
    from agentlens.model import Trace

    doc = Trace.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out_console.print(json.dumps(doc, indent=2), markup=False)
