"""`satchel run` against a real model: llama.cpp's server serving SmolLM2-135M-Instruct, one
server for the module, a shipped game in compact frames, the open-weight adapter's profile.

Two runs are played and each test reads what it needs from them, through a tap that keeps
what went over the wire: a non-streamed one of two actions whose first answer the tap spoils
(so the harness retries against the real model) and whose context is summarized once between
the actions by the real model, and a streamed one of one action.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.model_tap import SPOILED, Exchange, ModelTap, requests_after
from satchel.cli import app
from satchel.compaction import SUMMARY_PROMPT
from satchel.harness.llama import CONTEXT_TOKENS, LlamaServer, smollm2_server

# one process plays both games for every test of the module (scripts/test distributes by group)
pytestmark = pytest.mark.xdist_group("real_model")
KEY_ENV = "OPEN_WEIGHT_API_KEY"
GAME = "maze-0001"  # its actions: ACTION1-4 (up, down, left, right)
THREADS = 2
PARAGRAPH = "\n\n"  # this small model's summary goes on repeating itself after its first
ANSWER_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "action",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "actions": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "action_type": {"enum": ["ACTION1", "ACTION2", "ACTION3", "ACTION4"]}
                        },
                        "required": ["action_type"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["actions"],
            "additionalProperties": False,
        },
    },
}


def profile(folder: Path, base_url: str, *, stream: bool, summarize: bool) -> Path:
    """A profile of the open-weight adapter for SmolLM2: compact frames, temperature 0, actions
    held to the answer's JSON schema, answers stopped at a blank line; with `summarize`, a
    harness summary after the first frame (a compact frame is about half the model's context)."""
    compaction: dict[str, Any] = {"strategy": "none"}
    if summarize:
        compaction = {
            "strategy": "harness_summary",
            "trigger_tokens": CONTEXT_TOKENS // 2,
            "summary_max_output_tokens": 96,
            "summary_input_headroom_tokens": 1000,
        }
    entry = {
        "id": "smollm2",
        "agent": {
            "MAX_CONTEXT_LENGTH": CONTEXT_TOKENS,
            "MAX_RETRIES": 2,
            "FRAME_FORMAT": "compact",
        },
        "runtime": {
            "adapter_id": "open_source.chat_completions.v1",
            "state": "continuous_conversation",
            "reasoning_replay": ["reasoning_content"],
            "compaction": compaction,
        },
        "client": {"base_url": base_url, "api_key_env": KEY_ENV},
        "request": {
            "model": "smollm2-135m-instruct",
            "stream": stream,
            "max_tokens": 48,
            "temperature": 0,
            "stop": [PARAGRAPH],  # a summary ends with its first paragraph
            "response_format": ANSWER_SCHEMA,
        },
        "pricing": {"input": 0.1, "output": 0.2},
    }
    path = folder / "profiles.yaml"
    path.write_text(yaml.safe_dump([entry]), encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True)
class Played:
    """A run's output, its one run folder and what went over the wire."""

    output: str
    exit_code: int
    run_dir: Path
    exchanges: list[Exchange]

    def record(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / name).read_text("utf-8"))
        return data


def play(
    folder: Path, llama: LlamaServer, *, stream: bool, summarize: bool, actions: int, spoil: int
) -> Played:
    with ModelTap(llama.base_url, spoil=spoil) as tap:
        profiles = profile(folder, tap.base_url, stream=stream, summarize=summarize)
        args = ["run", "--profiles", str(profiles), "--config", "smollm2", "--game", GAME]
        args += ["--offline", "--max-actions", str(actions), "--runs-dir", str(folder / "runs")]
        result = CliRunner().invoke(app, args, env={KEY_ENV: "unused", "COLUMNS": "200"})
        exchanges = tap.exchanges
    (run_dir,) = (folder / "runs").glob(f"{GAME}.smollm2.*")
    return Played(result.output, result.exit_code, run_dir, exchanges)


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    with smollm2_server(threads=THREADS) as server:
        yield server


@pytest.fixture(scope="module")
def summarized(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Played:
    folder = tmp_path_factory.mktemp("summarized")
    return play(folder, llama, stream=False, summarize=True, actions=2, spoil=1)


@pytest.fixture(scope="module")
def streamed(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Played:
    folder = tmp_path_factory.mktemp("streamed")
    return play(folder, llama, stream=True, summarize=False, actions=1, spoil=0)


def server_usage(exchanges: list[Exchange]) -> dict[str, int]:
    """The server's own counts over `exchanges`, in the records' names."""
    return {
        "input_tokens": sum(e.usage["prompt_tokens"] for e in exchanges),
        "output_tokens": sum(e.usage["completion_tokens"] for e in exchanges),
        "cache_read_tokens": sum(
            e.usage.get("prompt_tokens_details", {}).get("cached_tokens", 0) for e in exchanges
        ),
        "requests": len(exchanges),
    }


def counted(usage: dict[str, Any]) -> dict[str, int]:
    return {
        name: usage[name]
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "requests")
    }


def is_summary(exchange: Exchange) -> bool:
    return exchange.request["messages"][-1]["content"] == SUMMARY_PROMPT


def test_the_real_model_plays_both_actions(summarized: Played) -> None:
    assert summarized.exit_code == 0, summarized.output
    meta = summarized.record("run_meta.json")
    assert meta["exit_reason"] == "ACTION_BUDGET"
    assert meta["actions"] == 2
    assert meta["frame_format"] == "compact"


def test_records_carry_the_servers_own_usage(summarized: Played) -> None:
    first, retry, summary, second = summarized.exchanges
    assert is_summary(summary) and not any(map(is_summary, (first, retry, second)))
    assert counted(summarized.record("step_001.json")["usage"]) == server_usage([first, retry])
    assert counted(summarized.record("compaction_001.json")["usage"]) == server_usage([summary])
    # the summary is billed to the next accepted turn
    assert counted(summarized.record("step_002.json")["usage"]) == server_usage([summary, second])
    meta = summarized.record("run_meta.json")
    assert counted(meta["total_usage"]) == server_usage(summarized.exchanges)
    assert server_usage([retry])["cache_read_tokens"] > 0  # the retry's prompt was cached


def test_a_retry_after_an_invalid_answer_leaks_nothing(summarized: Played) -> None:
    first, retry, *later = summarized.exchanges
    assert first.spoiled and first.text == SPOILED
    assert retry.request == first.request  # the retry starts again from the accepted state
    assert all(SPOILED not in sent for sent in requests_after(summarized.exchanges, 0))
    step = summarized.record("step_001.json")
    assert step["attempts"] == 2
    assert [retry["kind"] for retry in step["retries"]] == ["invalid_answer"]
    assert step["response"] == retry.text
    assert later  # the game went on after the retry


def test_the_real_model_writes_the_one_summary(summarized: Played) -> None:
    summary = next(e for e in summarized.exchanges if is_summary(e))
    second = summarized.exchanges[-1]
    assert "response_format" not in summary.request  # prose, not an action
    assert summary.text.strip()
    assert not summary.text.lstrip().startswith("{")
    (record,) = sorted(summarized.run_dir.glob("compaction_*.json"))
    assert json.loads(record.read_text("utf-8"))["summary"] == summary.text.strip()
    sent = second.request["messages"]
    assert summary.text.strip() in sent[1]["content"]  # the bridge follows the instructions
    first_frame = summarized.exchanges[0].request["messages"][1]["content"]
    assert all(message["content"] != first_frame for message in sent)
    assert summarized.record("run_meta.json")["runtime"]["compaction"]["count"] == 1


def test_a_streamed_answer_parses_with_the_servers_usage(streamed: Played) -> None:
    assert streamed.exit_code == 0, streamed.output
    (exchange,) = streamed.exchanges
    assert exchange.request["stream"] is True
    step = streamed.record("step_001.json")
    assert step["response"] == exchange.text
    assert step["action"]["name"] in ("ACTION1", "ACTION2", "ACTION3", "ACTION4")
    assert counted(step["usage"]) == server_usage([exchange])
    assert streamed.record("run_meta.json")["actions"] == 1
