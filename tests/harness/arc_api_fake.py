"""A loopback fake of the ARC-AGI-3 API, playing satchel's own games behind the endpoints that
the toolkit's ONLINE mode (`arc_agi.Arcade(operation_mode=ONLINE)`) calls.

The routes and answer shapes follow what `arc_agi` 0.9.9 sends and parses, and what its own
reference server (`arc_agi/api.py`) answers:

- `GET /api/games/anonkey`: `{"api_key": ...}` (asked only when no key is given; no key needed).
- `GET /api/games`: a list of game entries (no `baseline_actions`, as `api.py` excludes them).
- `GET /api/games/{id}`: one entry, `id` being the game id or its prefix before `-`; 404 if none.
- `POST /api/scorecard/open` `{tags, source_url?, opaque?}`: `{"card_id": ...}`.
- `POST /api/scorecard/close` `{card_id}`: the scorecard (`EnvironmentScorecard` fields); 404 when
  the card is unknown or already closed.
- `GET /api/scorecard/{card_id}`: the same, while open.
- `POST /api/cmd/RESET` `{card_id, game_id, guid?}`: a frame; without a known `guid` a new play.
- `POST /api/cmd/ACTION{1..7}` `{game_id, guid, x?, y?, reasoning?}`: a frame.

A frame is `{game_id, guid, frame, state, levels_completed, win_levels, action_input, full_reset,
available_actions}`. Every route but the anonymous key needs `X-API-Key` equal to the fake's key
(401 otherwise). Every request is recorded, in arrival order, with its JSON body and whether its
key was right; nothing is logged.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from satchel.harness.games import GAMES_DIR
from satchel.harness.loopback import Served

MAX_REASONING_BYTES = 16 * 1024  # arcengine's ActionInput guard-rail
MAX_OPAQUE_BYTES = 16 * 1024  # arc_agi/api.py's scorecard guard-rail
SESSION_COOKIE = "ARCSESSION"
_ACTION = re.compile(r"/api/cmd/(RESET|ACTION[1-7])")
_GAME_LIST_EXCLUDED = {"private_tags", "level_tags", "baseline_actions"}


@dataclass(frozen=True, slots=True)
class Call:
    """One request the fake received."""

    method: str
    path: str
    body: Any  # the parsed JSON body (None for none or not JSON)
    key_ok: bool
    cookie: str | None  # the Cookie header as sent
    status: int = 0  # the status answered (0 until answered)
    answer: Any = None  # the JSON answered

    @property
    def command(self) -> str | None:
        """`RESET` or `ACTION<n>` for a game command, else None."""
        match = _ACTION.fullmatch(self.path)
        return match.group(1) if match else None


@dataclass(slots=True)
class _Card:
    card_id: str
    tags: list[str]
    source_url: str | None
    opaque: Any
    api_key: str
    guids: list[str]


@dataclass(slots=True)
class _Play:
    guid: str
    game_id: str
    card_id: str
    wrapper: Any  # arc_agi's LocalEnvironmentWrapper


class ArcApiFake:
    """The fake, on loopback; a context manager, or `start()` / `stop()`.

    `faults` maps a path (e.g. `/api/scorecard/close`) to an HTTP status answered there instead
    of the real answer (after the key check), to try failures.
    """

    def __init__(
        self,
        api_key: str = "arc-test-key",
        *,
        games_dir: Path = GAMES_DIR,
        faults: Mapping[str, int] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.api_key = api_key
        self.games_dir = games_dir
        self.faults = dict(faults or {})
        self.host = host
        self.port = 0
        self._calls: list[Call] = []
        self._changed = threading.Condition()
        self._state = threading.Lock()
        self._cards: dict[str, _Card] = {}
        self._closed_cards: list[str] = []
        self._plays: dict[str, _Play] = {}
        self._served: Served | None = None
        self._arcade: Any = None

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://<host>:<port>` (the toolkit appends `/api/...`), once started."""
        if self._served is None:
            raise RuntimeError("the ARC API fake is not running")
        return f"http://{self.host}:{self.port}"

    def start(self) -> ArcApiFake:
        if self._served is not None:
            raise RuntimeError("the ARC API fake is already running")
        self._arcade = _local_arcade(self.games_dir)
        httpd = _Server((self.host, 0), _Handler)
        httpd.fake = self
        self._served = Served(httpd, "arc-api-fake")
        self.port = self._served.port
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()
            self._served = None

    def __enter__(self) -> ArcApiFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests read --------------------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        """A snapshot of every request received so far, in arrival order."""
        with self._changed:
            return list(self._calls)

    def calls_to(self, path: str) -> list[Call]:
        return [call for call in self.calls if call.path == path]

    @property
    def commands(self) -> list[Call]:
        """The RESET and ACTION requests, in order."""
        return [call for call in self.calls if call.command is not None]

    @property
    def closed_cards(self) -> list[str]:
        """The cards closed (successfully), in order."""
        with self._state:
            return list(self._closed_cards)

    @property
    def open_cards(self) -> list[str]:
        with self._state:
            return list(self._cards)

    def wait_for(self, condition: Callable[[list[Call]], bool], timeout: float = 10.0) -> bool:
        """Wait until `condition(calls)` holds (True) or `timeout` seconds pass (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(list(self._calls)), timeout)

    # -- the API --------------------------------------------------------------------------------

    def _record(self, call: Call) -> int:
        with self._changed:
            self._calls.append(call)
            self._changed.notify_all()
            return len(self._calls) - 1

    def _answered(self, index: int, status: int, answer: Any) -> None:
        with self._changed:
            self._calls[index] = replace(self._calls[index], status=status, answer=answer)
            self._changed.notify_all()

    def _games(self) -> list[dict[str, Any]]:
        return [
            env.model_dump(mode="json", exclude=_GAME_LIST_EXCLUDED)
            for env in self._arcade.available_environments
        ]

    def _game(self, game_id: str) -> dict[str, Any] | None:
        for entry in self._games():
            if entry["game_id"] == game_id or entry["game_id"].startswith(f"{game_id}-"):
                return entry
        return None

    def _open(self, body: Mapping[str, Any]) -> tuple[int, Any, str | None]:
        opaque = body.get("opaque")
        if len(json.dumps(opaque, separators=(",", ":")).encode()) > MAX_OPAQUE_BYTES:
            return 400, _error("VALIDATION_ERROR", "opaque exceeds 16 KB"), None
        tags = body.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            return 400, _error("VALIDATION_ERROR", "tags must be a list of strings"), None
        tags = list(tags)
        if "human" not in tags and "agent" not in tags:
            tags.append("agent")  # as the reference server does
        card = _Card(str(uuid.uuid4()), tags, body.get("source_url"), opaque, self.api_key, [])
        with self._state:
            self._cards[card.card_id] = card
        return 200, {"card_id": card.card_id}, uuid.uuid4().hex

    def _close(self, body: Mapping[str, Any]) -> tuple[int, Any]:
        card_id = body.get("card_id")
        if not isinstance(card_id, str):
            return 400, _error("VALIDATION_ERROR", "missing `card_id` in action data")
        with self._state:
            card = self._cards.pop(card_id, None)
            if card is None:
                return 404, _error("VALIDATION_ERROR", f"scorecard {card_id} not found")
            self._closed_cards.append(card_id)
            for guid in card.guids:
                self._plays.pop(guid, None)
        return 200, _scorecard(card)

    def _scorecard(self, card_id: str) -> tuple[int, Any]:
        with self._state:
            card = self._cards.get(card_id)
        if card is None:
            return 404, _error("SERVER_ERROR", f"card_id `{card_id}` not found")
        return 200, _scorecard(card)

    def _command(self, command: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        from arcengine import ActionInput, GameAction
        from pydantic import ValidationError

        action = GameAction[command]
        game_id = body.get("game_id")
        if not isinstance(game_id, str) or not game_id:
            return 400, _error("VALIDATION_ERROR", "missing `game_id` in action data")
        try:
            action.validate_data(dict(body))
            data = {name: body[name] for name in action.action_type.model_fields if name in body}
            data.pop("game_id", None)
            reasoning = body.get("reasoning")
            ActionInput(id=action, data=data, reasoning=reasoning)  # the 16 KB guard-rail
        except ValidationError as exc:
            return 400, _error("VALIDATION_ERROR", f"error creating ActionInput: {exc}")
        guid = body.get("guid")
        with self._state:
            play = self._plays.get(guid) if isinstance(guid, str) else None
            if play is not None and play.game_id != game_id:
                play = None
            if play is None:
                if action is not GameAction.RESET:
                    if not guid:
                        message = "missing `guid` for any action other than RESET"
                        return 400, _error("VALIDATION_ERROR", message)
                    return 400, _error("SERVER_ERROR", f"game {game_id} not found")
                return self._new_play(game_id, body.get("card_id"))
            if action is GameAction.RESET:
                frame = play.wrapper.step(action)
            else:
                frame = play.wrapper.step(action, data=data or None, reasoning=reasoning)
        if frame is None:
            return 500, _error("SERVER_ERROR", f"game {game_id} failed on {command}")
        return 200, _frame(frame, play.game_id, play.guid, reasoning)

    def _new_play(self, game_id: str, card_id: Any) -> tuple[int, Any]:
        """A new play of `game_id` under the open card `card_id` (the state lock is held)."""
        card = self._cards.get(card_id) if isinstance(card_id, str) else None
        if card is None:
            return 400, _error("SERVER_ERROR", f"game {game_id} not found (no open scorecard)")
        entry = self._game(game_id)
        if entry is None:
            return 400, _error("SERVER_ERROR", f"game {game_id} not found")
        wrapper = self._arcade.make(entry["game_id"], scorecard_id=card.card_id)
        if wrapper is None or wrapper.observation_space is None:
            return 500, _error("SERVER_ERROR", f"game {game_id} could not be started")
        guid = str(uuid.uuid4())
        self._plays[guid] = _Play(guid, entry["game_id"], card.card_id, wrapper)
        card.guids.append(guid)
        return 200, _frame(wrapper.observation_space, entry["game_id"], guid, None, full=True)

    def _answer(
        self, method: str, path: str, body: Any
    ) -> tuple[int, Any, str | None]:  # status, JSON, cookie to set
        if method == "GET" and path == "/api/games/anonkey":
            return 200, {"api_key": self.api_key}, None
        if path in self.faults:
            return self.faults[path], _error("SERVER_ERROR", f"injected fault on {path}"), None
        if method == "GET":
            if path == "/api/games":
                return 200, self._games(), None
            if path.startswith("/api/games/"):
                entry = self._game(path.removeprefix("/api/games/"))
                if entry is None:
                    return 404, _error("SERVER_ERROR", f"game {path} not found"), None
                return 200, entry, None
            if path.startswith("/api/scorecard/"):
                card_id = path.removeprefix("/api/scorecard/").split("/", 1)[0]
                return (*self._scorecard(card_id), None)
            return 404, _error("SERVER_ERROR", f"no such route: GET {path}"), None
        if not isinstance(body, dict):
            return 400, _error("VALIDATION_ERROR", "the body must be a JSON object"), None
        if path == "/api/scorecard/open":
            return self._open(body)
        if path == "/api/scorecard/close":
            return (*self._close(body), None)
        match = _ACTION.fullmatch(path)
        if match:
            return (*self._command(match.group(1), body), None)
        return 404, _error("SERVER_ERROR", f"no such route: POST {path}"), None


def _local_arcade(games_dir: Path) -> Any:
    """The toolkit OFFLINE over `games_dir`, as the reference server plays its games."""
    from arc_agi import Arcade, OperationMode

    quiet = logging.getLogger("harness.arc_api_fake")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)  # it prints to stdout
    return Arcade(
        operation_mode=OperationMode.OFFLINE, environments_dir=str(games_dir), logger=quiet
    )


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": kind, "message": message}


def _scorecard(card: _Card) -> dict[str, Any]:
    """The scorecard as `EnvironmentScorecard` fields (the toolkit validates the answer)."""
    return {
        "card_id": card.card_id,
        "source_url": card.source_url,
        "tags": card.tags,
        "opaque": card.opaque,
        "score": 0.0,
        "environments": [],
        "tags_scores": [],
        "competition_mode": False,
    }


def _frame(frame: Any, game_id: str, guid: str, reasoning: Any, *, full: bool = False) -> Any:
    """The toolkit's frame data in the wire shape `FrameData.model_validate` parses."""
    action_input = frame.action_input
    return {
        "game_id": game_id,
        "guid": guid,
        "frame": [layer.tolist() for layer in frame.frame],
        "state": frame.state.name,
        "levels_completed": frame.levels_completed,
        "win_levels": frame.win_levels,
        "action_input": {
            "id": action_input.id.value,
            "data": action_input.data,
            "reasoning": reasoning,
        },
        "full_reset": full or bool(frame.full_reset),
        "available_actions": list(frame.available_actions),
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "arc-api-fake"
    sys_version = ""
    protocol_version = "HTTP/1.1"  # requests keeps its connections alive, as with the real API
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: http.server would log every request to stderr."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        raw = self._body()
        try:
            body = json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        key_ok = self.headers.get("X-API-Key") == fake.api_key
        index = fake._record(Call(method, path, body, key_ok, self.headers.get("Cookie")))
        cookie = None
        if not key_ok and path != "/api/games/anonkey":
            status, answer = 401, _error("AUTHENTICATION_ERROR", "invalid or missing X-API-Key")
        else:
            try:
                status, answer, cookie = fake._answer(method, path, body)
            except Exception as exc:  # a defect of the fake: answer it, never hang the client
                status, answer = 500, _error("SERVER_ERROR", f"{type(exc).__name__}: {exc}")
        payload = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if cookie is not None:
            self.send_header("Set-Cookie", f"{SESSION_COOKIE}={cookie}; Path=/")
        self.end_headers()
        self.wfile.write(payload)
        fake._answered(index, status, answer)

    def _body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: ArcApiFake

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (an interrupted run) is not worth a traceback."""
        if isinstance(sys.exception(), ConnectionError):
            return
        super().handle_error(request, client_address)


def reasoning_sizes(calls: list[Call]) -> Iterator[tuple[int, int]]:
    """For each ACTION carrying reasoning: the bytes of the string the toolkit sent, and of the
    JSON the API measures against its 16 KB (`json.dumps(value, separators=(",", ":"))`)."""
    for call in calls:
        if call.command and isinstance(call.body, dict) and "reasoning" in call.body:
            value = call.body["reasoning"]
            sent = value.encode() if isinstance(value, str) else json.dumps(value).encode()
            yield len(sent), len(json.dumps(value, separators=(",", ":")).encode())
