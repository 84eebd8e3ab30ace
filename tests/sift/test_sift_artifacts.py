"""The artifact store's tiers and caps, and the three artifact tools."""

import json
from pathlib import Path

import pytest

from satchel.sift import (
    ARTIFACT_TOOL_NAMES,
    Artifact,
    ArtifactStore,
    ArtifactTools,
    anthropic_tools,
    artifact_tool_definitions,
)


def artifact(number: int, chars: int = 100) -> Artifact:
    return Artifact(
        f"call_{number}", "read_file", f"path=src/{number}.py", str(number % 10) * chars
    )


def test_put_is_idempotent_and_lists_oldest_first() -> None:
    store = ArtifactStore()
    for number in (3, 1, 2):
        store.put(artifact(number))
    store.put(Artifact("call_1", "other", "", "replaced?"))
    assert [info.id for info in store.infos()] == ["call_3", "call_1", "call_2"]
    found = store.get("call_1")
    assert found is not None and found.text == "1" * 100 and found.tool == "read_file"
    assert store.get("call_9") is None and "call_9" not in store


def test_the_memory_tier_drops_its_oldest_at_the_cap() -> None:
    store = ArtifactStore(memory_chars=250)
    for number in range(4):
        store.put(artifact(number))
    assert [info.id for info in store.infos()] == ["call_2", "call_3"]
    assert store.get("call_0") is None


def test_the_file_tier_keeps_what_memory_dropped_and_survives_a_relaunch(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, memory_chars=150, file_chars=1000)
    for number in range(4):
        store.put(artifact(number))
    assert [info.id for info in store.infos()] == [f"call_{n}" for n in range(4)]
    found = store.get("call_0")
    assert found is not None and found.text == "0" * 100
    relaunched = ArtifactStore(tmp_path)
    assert [info.id for info in relaunched.infos()] == [f"call_{n}" for n in range(4)]
    again = relaunched.get("call_2")
    assert again is not None and again.hint == "path=src/2.py" and again.text == "2" * 100
    relaunched.put(artifact(4))
    assert [info.id for info in ArtifactStore(tmp_path).infos()][-1] == "call_4"


def test_the_file_tier_keeps_an_output_with_a_lone_surrogate(tmp_path: Path) -> None:
    text = "decoded with surrogateescape: \udcff end"
    store = ArtifactStore(tmp_path, memory_chars=0)
    store.put(Artifact("call_1", "read_file", "path=a.bin", text))
    found = ArtifactStore(tmp_path).get("call_1")
    assert found is not None and found.text == text


def test_the_file_tier_drops_its_oldest_at_the_cap(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, file_chars=250)
    for number in range(4):
        store.put(artifact(number))
    assert [info.id for info in store.infos()] == ["call_2", "call_3"]
    assert store.get("call_0") is None
    assert len(list(tmp_path.glob("*.artifact"))) == 2


def test_negative_caps_are_refused() -> None:
    with pytest.raises(ValueError, match="caps must not be negative"):
        ArtifactStore(memory_chars=-1)


def test_the_tool_definitions_are_function_tools_with_their_schemas() -> None:
    definitions = {d["function"]["name"]: d for d in artifact_tool_definitions()}
    assert set(definitions) == set(ARTIFACT_TOOL_NAMES)
    read = definitions["artifact_read"]["function"]["parameters"]
    assert read["required"] == ["id"] and set(read["properties"]) == {"id", "offset", "limit"}
    assert read["properties"]["offset"] == {
        "type": "integer",
        "minimum": 0,
        "description": "First character to read (default 0).",
    }
    search = definitions["artifact_search"]["function"]["parameters"]
    assert search["required"] == ["id", "query"]
    assert definitions["artifact_list"]["function"]["parameters"]["properties"] == {}
    converted = anthropic_tools(artifact_tool_definitions())
    assert [tool["name"] for tool in converted] == sorted(ARTIFACT_TOOL_NAMES)
    assert converted[1]["input_schema"] == read
    json.dumps(definitions)


def test_artifact_read_returns_a_window_and_where_to_go_on() -> None:
    store = ArtifactStore()
    store.put(Artifact("call_1", "grep", "q=x", "abcdefghij"))
    tools = ArtifactTools(store, read_limit=4)
    assert tools.call("artifact_read", '{"id": "call_1"}') == (
        "artifact call_1, characters 0 to 4 of 10:\nabcd"
        '\n[more: artifact_read(id="call_1", offset=4)]'
    )
    assert tools.call("artifact_read", {"id": "call_1", "offset": 8, "limit": 5}) == (
        "artifact call_1, characters 8 to 10 of 10:\nij"
    )


def test_artifact_search_gives_lines_and_offsets() -> None:
    store = ArtifactStore()
    store.put(Artifact("log", "run_tests", "", "ok one\nFAILED two\nok three\nfailed four\n"))
    tools = ArtifactTools(store, max_matches=1)
    assert tools.call("artifact_search", '{"id": "log", "query": "failed"}') == (
        "2 lines of artifact log contain 'failed' (first 1 shown):\noffset 7, line 2: FAILED two"
    )
    assert tools.call("artifact_search", '{"id": "log", "query": "nope"}') == (
        "no line of artifact log contains 'nope'"
    )


def test_artifact_list_names_every_stored_artifact() -> None:
    store = ArtifactStore()
    tools = ArtifactTools(store)
    assert tools.call("artifact_list", "") == "no artifacts stored"
    store.put(artifact(1))
    store.put(artifact(2, 7))
    assert tools.call("artifact_list", "{}") == (
        "call_1: read_file(path=src/1.py), 100 chars\ncall_2: read_file(path=src/2.py), 7 chars"
    )


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("artifact_read", "{", "error: the arguments are not valid JSON"),
        ("artifact_read", "[1]", "error: the arguments must be a JSON object"),
        ("artifact_read", "{}", "error: `id` must be an artifact id string"),
        ("artifact_read", '{"id": "a", "offset": -1}', "error: `offset` must be an integer"),
        ("artifact_read", '{"id": "a", "limit": true}', "error: `limit` must be an integer"),
        ("artifact_search", '{"id": "a", "query": " "}', "error: `query` must be a non-empty"),
        ("artifact_read", '{"id": "gone"}', "error: no artifact 'gone' is stored"),
    ],
)
def test_a_models_bad_arguments_get_an_error_result(
    name: str, arguments: str, message: str
) -> None:
    store = ArtifactStore()
    store.put(Artifact("a", "grep", "", "text"))
    assert ArtifactTools(store).call(name, arguments).startswith(message)


def test_calling_a_tool_that_is_not_an_artifact_tool_is_a_caller_error() -> None:
    tools = ArtifactTools(ArtifactStore())
    assert tools.handles("artifact_list") and not tools.handles("read_file")
    with pytest.raises(ValueError, match="'read_file' is not an artifact tool"):
        tools.call("read_file", "{}")
