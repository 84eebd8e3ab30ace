"""The three artifact tools a model calls to read what receipts and bounded results left out:
`artifact_read(id, offset, limit)`, `artifact_search(id, query)` and `artifact_list()`."""

import json
from collections.abc import Mapping
from typing import Any

from satchel.sift.artifacts import ArtifactStore

ARTIFACT_READ = "artifact_read"
ARTIFACT_SEARCH = "artifact_search"
ARTIFACT_LIST = "artifact_list"
ARTIFACT_TOOL_NAMES = frozenset({ARTIFACT_READ, ARTIFACT_SEARCH, ARTIFACT_LIST})
LINE_CHARS = 200


def artifact_tool_definitions(read_limit: int = 4000, list_limit: int = 50) -> list[dict[str, Any]]:
    """The three tools as OpenAI function tools (`anthropic_tools` converts them)."""
    return [
        _function(
            ARTIFACT_LIST,
            f"List the newest {list_limit} stored artifacts: full outputs of earlier tool calls "
            "that the conversation shows only as receipts or bounded results.",
            {},
            [],
        ),
        _function(
            ARTIFACT_READ,
            "Read part of a stored artifact by character offset.",
            {
                "id": {"type": "string", "description": "The artifact id from a receipt."},
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "First character to read (default 0).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"Most characters to return (default and at most {read_limit}).",
                },
            },
            ["id"],
        ),
        _function(
            ARTIFACT_SEARCH,
            "Find the lines of a stored artifact that contain a text (case-insensitive); each "
            "match gives its character offset for artifact_read.",
            {
                "id": {"type": "string", "description": "The artifact id from a receipt."},
                "query": {"type": "string", "description": "The text to look for."},
            },
            ["id", "query"],
        ),
    ]


class ArtifactTools:
    """Runs the artifact tools against a store; a model's bad arguments get an `error:` result."""

    def __init__(
        self,
        store: ArtifactStore,
        *,
        read_limit: int = 4000,
        max_matches: int = 20,
        list_limit: int = 50,
    ):
        self.store = store
        self.read_limit = read_limit
        self.max_matches = max_matches
        self.list_limit = list_limit

    @property
    def definitions(self) -> list[dict[str, Any]]:
        """The tool definitions to hand to a model."""
        return artifact_tool_definitions(self.read_limit, self.list_limit)

    @staticmethod
    def handles(name: str) -> bool:
        """Whether `name` is one of the artifact tools."""
        return name in ARTIFACT_TOOL_NAMES

    def call(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Run one call and return its result text."""
        if name not in ARTIFACT_TOOL_NAMES:
            raise ValueError(f"{name!r} is not an artifact tool; expected one of {_names()}")
        try:
            parsed = json.loads(arguments or "{}") if isinstance(arguments, str) else arguments
        except json.JSONDecodeError as exc:
            return f"error: the arguments are not valid JSON ({exc.msg})"
        if not isinstance(parsed, Mapping):
            return "error: the arguments must be a JSON object"
        if name == ARTIFACT_LIST:
            return self.list_artifacts()
        artifact_id = parsed.get("id")
        if not isinstance(artifact_id, str) or not artifact_id:
            return "error: `id` must be an artifact id string; artifact_list() shows them"
        if name == ARTIFACT_READ:
            offset = parsed.get("offset", 0)
            limit = parsed.get("limit", self.read_limit)
            if not _is_int(offset) or offset < 0:
                return "error: `offset` must be an integer of at least 0"
            if not _is_int(limit) or limit < 1:
                return "error: `limit` must be an integer of at least 1"
            return self.read(artifact_id, offset, limit)
        query = parsed.get("query")
        if not isinstance(query, str) or not query.strip():
            return "error: `query` must be a non-empty string"
        return self.search(artifact_id, query)

    def list_artifacts(self) -> str:
        """`artifact_list()`: one line per stored artifact, oldest first; past `list_limit`
        artifacts, only the newest are listed, after a line saying how many are stored."""
        infos = self.store.infos()
        if not infos:
            return "no artifacts stored"
        lines = [
            f"{info.id}: {info.tool}({info.hint}), {info.chars} chars"
            for info in infos[max(len(infos) - self.list_limit, 0) :]
        ]
        if len(infos) > len(lines):
            lines.insert(
                0,
                f"{len(infos)} artifacts stored; the newest {len(lines)} are listed, oldest "
                "first (the receipts name the older ids):",
            )
        return "\n".join(lines)

    def read(self, artifact_id: str, offset: int, limit: int) -> str:
        """`artifact_read(id, offset, limit)`: the characters `[offset, offset + limit)`, at most
        `read_limit` of them."""
        artifact = self.store.get(artifact_id)
        if artifact is None:
            return _missing(artifact_id)
        total = len(artifact.text)
        start = min(offset, total)
        end = min(start + min(limit, self.read_limit), total)
        header = f"artifact {artifact_id}, characters {start} to {end} of {total}:"
        more = f"\n[more: artifact_read(id={json.dumps(artifact_id)}, offset={end})]"
        return f"{header}\n{artifact.text[start:end]}{more if end < total else ''}"

    def search(self, artifact_id: str, query: str) -> str:
        """`artifact_search(id, query)`: matching lines with their character offsets."""
        artifact = self.store.get(artifact_id)
        if artifact is None:
            return _missing(artifact_id)
        needle = query.lower()
        matches: list[str] = []
        found = 0
        offset = 0
        for number, line in enumerate(artifact.text.splitlines(keepends=True), start=1):
            if needle in line.lower():
                found += 1
                if len(matches) < self.max_matches:
                    shown = line.rstrip("\n")[:LINE_CHARS]
                    matches.append(f"offset {offset}, line {number}: {shown}")
            offset += len(line)
        if not found:
            return f"no line of artifact {artifact_id} contains {query!r}"
        shown_note = f" (first {len(matches)} shown)" if found > len(matches) else ""
        return f"{found} lines of artifact {artifact_id} contain {query!r}{shown_note}:\n" + (
            "\n".join(matches)
        )


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def _missing(artifact_id: str) -> str:
    return (
        f"error: no artifact {artifact_id!r} is stored (never stored, or dropped as the oldest "
        "when the store reached its size cap); artifact_list() shows the stored ids"
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names() -> str:
    return ", ".join(sorted(ARTIFACT_TOOL_NAMES))
