"""Schema-driven fuzzing: schemathesis generates requests from the served OpenAPI of a live server,
for every operation, and the answers must hold to that schema.

Checks, on every generated request: no 5xx (`not_a_server_error`); the status is documented, the
content type and body match the schema (`status_code_conformance`, `content_type_conformance`,
`response_schema_conformance`); and data the schema calls valid is accepted
(`positive_data_acceptance`: a 2xx, or an answer that follows from state, such as 404 for a random
id or 409 for a repeated key; never a 400). Each operation runs on a fresh database with a
read-write token of its own, derandomized, so a run is repeatable.

One rule of the contract is beyond what a JSON Schema can state: a turn's group ordinals start at
0 and rise by 0 or 1 from one message to the next. Generated observations get their ordinals
renumbered to keep it (`contiguous`); everything else is sent exactly as generated.

The notification routes of a deployment with no destination configured always refuse with their
documented 501, so for them only the documented-answer checks apply.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from memory_kit import LiveServer
from memory_routes import memory_app
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from satchel.memory.api.routes.notifications import router as notifications

EXAMPLES = 30  # per operation, of schema-valid requests
INVALID_EXAMPLES = 10  # per operation, of schema-invalid ones
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    positive_data_acceptance,
]
DOCUMENTED = [status_code_conformance, content_type_conformance, response_schema_conformance]
UNAVAILABLE = {route.path for route in notifications.routes}  # type: ignore[attr-defined]

settings.register_profile(
    "memory-fuzz",
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

OPERATIONS = [
    pytest.param(method.upper(), path, id=f"{method.upper()} {path}")
    for path, item in memory_app().openapi()["paths"].items()
    for method in item
]


def contiguous(case: Any) -> Any:
    """The case with its messages' group ordinals renumbered from 0, each the same as or one more
    than the one before (a generated ordinal above the previous one starts the next group)."""
    messages = case.body.get("messages") if isinstance(case.body, dict) else None
    previous = None
    for message in messages or []:
        if isinstance(message, dict) and isinstance(message.get("group_ordinal"), int | float):
            given = message["group_ordinal"]
            group = 0 if previous is None else previous + int(given > previous)
            message["group_ordinal"] = previous = group
    return case


def fuzz(server: LiveServer, method: str, path: str, mode: GenerationMode) -> list[int]:
    """Send generated requests of one operation (in `mode`) with a read-write token, check each
    answer, and return the statuses answered."""
    headers = {"Authorization": f"Bearer {server.token('fuzz')}"}
    schema = schemathesis.openapi.from_url(
        f"{server.base_url}/openapi.json", config=schemathesis.Config.from_dict({})
    )
    operation = schema[path][method]
    checks = CHECKS if mode is GenerationMode.POSITIVE else CHECKS[:-1]
    if path in UNAVAILABLE:
        checks = DOCUMENTED
    answered: list[int] = []

    @given(case=operation.as_strategy(generation_mode=mode).map(contiguous))
    @settings(
        settings.get_profile("memory-fuzz"),
        max_examples=EXAMPLES if mode is GenerationMode.POSITIVE else INVALID_EXAMPLES,
    )
    def holds(case: Any) -> None:
        response = case.call(base_url=server.base_url, headers=headers, timeout=60)
        answered.append(response.status_code)
        case.validate_response(response, checks=checks, headers=headers)

    holds()
    return answered


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_schema_valid_requests_are_accepted(
    live_server: LiveServer, method: str, path: str
) -> None:
    assert fuzz(live_server, method, path, GenerationMode.POSITIVE)


@pytest.mark.parametrize(("method", "path"), [op for op in OPERATIONS if op.values[0] == "POST"])
def test_schema_invalid_requests_are_refused_cleanly(
    live_server: LiveServer, method: str, path: str
) -> None:
    # The schema is sometimes stricter than the handlers (a blank subject that counts as left
    # out, the safe window of a timestamp), so an invalid request may be answered 2xx: the
    # checks ask only that none fails and that every answer is one the schema documents.
    assert fuzz(live_server, method, path, GenerationMode.NEGATIVE)
