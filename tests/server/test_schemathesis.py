"""The served OpenAPI document, tested with schemathesis: generated requests to every operation
get no 5xx, and every response matches the schema the document declares (bounded examples)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from agentlens.server import create_app

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.response_headers_conformance,
]
"""No 5xx, and every response (status, content type, body, headers) as the document says.
Whether a generated body is a valid run or OTLP request is not the schema's to say (the bodies
are declared as any object), so acceptance checks are left out."""


def _check(operation: Any) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def check(case: Any) -> None:
        response = case.call()
        assert response.status_code < 500, (operation.method, operation.path, response.text[:300])
        case.validate_response(response, checks=CHECKS)

    check()


def test_every_operation_conforms(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'schema.db'}", review=False)
    app.state.agentlens.start()
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 11
        for operation in operations:
            _check(operation)
    finally:
        app.state.agentlens.close()
