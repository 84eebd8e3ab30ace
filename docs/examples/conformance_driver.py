"""A conformance driver written with nothing but the Python standard library.

It runs a tiny framework-free agent (a stubbed model, one tool, a held history) with the memory
rules of the taisce v1 contract, and speaks the driver protocol on stdio: one instruction per line
in, one report per line out. It imports nothing of satchel, to show that the suite runs any
program that speaks the protocol, whatever it is written in.

    .venv/bin/satchel conformance --driver "python docs/examples/conformance_driver.py"
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from typing import Any

PREFIX = "taisce-memory/v1 untrusted"
COMPACT_AFTER = 2  # the agent compacts once it holds this many messages and compaction is armed


class ServiceError(Exception):
    """The deployment refused, or did not answer."""


class ModelFailed(Exception):
    """The stubbed model's failure, when the turn asks for one."""


class StoreFailed(Exception):
    """The turn was answered but not stored: raised to the application."""


class Memory:
    """The few v1 operations the agent needs, over urllib."""

    def __init__(self, api: str, token: str) -> None:
        self.api = api.rstrip("/")
        self.token = token

    def send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        for delay in (0.25, 0.5, 1.0, 2.0, None):
            request = urllib.request.Request(self.api + path, data=data, method=method)
            request.add_header("Authorization", "Bearer " + self.token)
            request.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return json.loads(response.read() or b"null")
            except urllib.error.HTTPError as error:
                if error.code == 429 and delay is not None:
                    time.sleep(delay)
                    continue
                raise ServiceError(f"{error.code} {_error_text(error)}") from None
            except urllib.error.URLError as error:
                raise ServiceError(f"the deployment did not answer ({error.reason})") from None
        raise ServiceError("unreachable")


def _error_text(error: urllib.error.HTTPError) -> str:
    try:
        detail = json.loads(error.read()).get("error") or {}
        return f"{detail.get('code', 'error')}: {detail.get('message', '')}"
    except (ValueError, AttributeError):
        return "error"


def render(document: dict[str, Any]) -> str:
    return PREFIX + "\n" + json.dumps(document, separators=(",", ":"))


def watermark(source: dict[str, Any]) -> dict[str, Any]:
    return {
        "stored": source.get("stored"),
        "formed": source.get("formed"),
        "parked": source.get("parked", 0),
    }


def turn_key(subject: str, run_id: str, messages: list[dict[str, Any]]) -> str:
    text = subject + "\n" + run_id + "\n"
    text += "".join(m["role"] + "\n" + m["content"] + "\n" for m in messages)
    raw = bytearray(hashlib.sha256(text.encode("utf-8")).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def recalled(memory: Memory, subject: str, question: str) -> dict[str, Any] | None:
    """The recall as a memory message, or None when it found nothing or failed."""
    try:
        recall = memory.send(
            "POST", "/v1/recalls", {"question": question, "data_subject_id": subject}
        )
        if not (recall.get("facts") or recall.get("reports") or recall.get("passages")):
            return None
        fresh = memory.send("GET", "/v1/freshness")
    except ServiceError as error:
        print(f"recall failed, running without memory: {error}", file=sys.stderr)
        return None
    document = {
        "watermark": watermark(fresh),
        "plan": {
            "controls": recall.get("controls"),
            "degraded": recall.get("degraded") or [],
            "reach": recall.get("reach"),
        },
        "facts": recall.get("facts") or [],
        "reports": recall.get("reports") or [],
        "passages": recall.get("passages") or [],
    }
    return {"role": "user", "content": render(document), "untrusted": True}


def compacted(memory: Memory, subject: str) -> dict[str, Any] | None:
    """The subject's context as a memory message, or None when it could not be fetched."""
    try:
        context = memory.send("POST", "/v1/contexts", {"data_subject_id": subject})
    except ServiceError as error:
        print(f"context failed, keeping the history: {error}", file=sys.stderr)
        return None
    document = {
        "watermark": watermark(context.get("watermark") or {}),
        "plan": {
            "characters": context.get("characters") or 0,
            "truncated": bool(context.get("truncated")),
        },
        "segments": context.get("segments") or [],
        "turns": context.get("turns") or [],
    }
    return {"role": "user", "content": render(document), "untrusted": True}


class StubModel:
    """Records what it was handed on its first call; asks for the turn's tools, then replies."""

    def __init__(self, turn: dict[str, Any]) -> None:
        self.turn = turn
        self.calls = 0
        self.first: list[dict[str, Any]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self.calls == 0:
            self.first = [dict(m) for m in messages]
        self.calls += 1
        if self.turn.get("model_failure"):
            raise ModelFailed("the model call failed")
        tool_calls = self.turn.get("tool_calls") or []
        if self.calls == 1 and tool_calls:
            return {"role": "assistant", "content": "", "tool_calls": tool_calls}
        return {"role": "assistant", "content": self.turn.get("assistant", "")}


def run_turn(instruction: dict[str, Any]) -> dict[str, Any]:
    turn = instruction["turn"]
    subject = instruction["data_subject_id"]
    memory = Memory(instruction["api"], instruction["token"])
    model = StubModel(turn)
    held = [dict(m) for m in turn.get("history") or []]
    held += [dict(m) for m in turn.get("synthetic") or []]
    if turn.get("compact") and len(held) >= COMPACT_AFTER:
        context = compacted(memory, subject)
        if context is not None:
            held = [context]
    messages = list(held)
    recall = recalled(memory, subject, turn["user"])
    if recall is not None:
        messages.append(recall)
    messages.append({"role": "user", "content": turn["user"]})
    report: dict[str, Any] = {"fatal": False, "observed": False, "store_error": ""}
    try:
        answer = model(messages)
        while answer.get("tool_calls"):
            messages.append(answer)
            for call in answer["tool_calls"]:
                messages.append({"role": "tool", "content": call["result"]})
            answer = model(messages)
        report["observed"] = True
        observed = [
            {"role": "user", "content": turn["user"], "group_ordinal": 0},
            {"role": "assistant", "content": answer["content"], "group_ordinal": 1},
        ]
        body = {
            "idempotency_key": turn_key(subject, instruction["case"], observed),
            "data_subject_id": subject,
            "occurred_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "messages": observed,
        }
        try:
            memory.send("POST", "/v1/observations", body)
        except ServiceError as error:
            report["store_error"] = f"the turn was not stored in memory: {error}"
            raise StoreFailed(report["store_error"]) from None
    except (ModelFailed, StoreFailed) as error:
        print(f"the turn failed: {error}", file=sys.stderr)
        report["fatal"] = True
    report["model_messages"] = [
        {"role": m["role"], "content": m["content"], "untrusted": bool(m.get("untrusted"))}
        for m in model.first
    ]
    return report


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            report = run_turn(json.loads(line))
        except Exception as error:
            print(f"the driver failed: {error!r}", file=sys.stderr)
            report = {"model_messages": [], "fatal": True, "observed": False, "store_error": ""}
        sys.stdout.write(json.dumps(report) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
