"""The HTTP server of `satchel view`: static pages and their scripts, the JSON they fetch, a
run's step records, and the report page, for one runs directory.

Every response carries a Content-Security-Policy (the pages': their own resources only; the
report page keeps its stricter one), `X-Content-Type-Options: nosniff` and
`Referrer-Policy: no-referrer`. Only GET is answered.
"""

from __future__ import annotations

import json
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from satchel.harness import report_html
from satchel.harness.report import read_runs
from satchel.harness.view.replay import run_folder, run_replay, runs_listing, step_file

CSP = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
"""The pages' policy: scripts, styles, images and fetches from this server only, none inline."""

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
}
STATIC = resources.files("satchel.harness.view") / "static"
NOT_FOUND = '<!DOCTYPE html><title>not found</title><p>Not found. <a href="/">All runs</a></p>\n'


class ViewServer(ThreadingHTTPServer):
    """Serves the pages of one runs directory."""

    daemon_threads = True

    def __init__(self, runs_dir: Path, host: str, port: int) -> None:
        self.runs_dir = runs_dir
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), ViewHandler)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"


class ViewHandler(BaseHTTPRequestHandler):
    """One request: the path is matched against the pages; a run folder must be one of the
    runs directory's."""

    server: ViewServer
    policy = CSP

    def do_GET(self) -> None:
        runs_dir = self.server.runs_dir
        parts = [unquote(part) for part in urlsplit(self.path).path.split("/")[1:]]
        match parts:
            case [""]:
                self._static("runs.html")
            case ["static", name]:
                self._static(name)
            case ["api", "runs"]:
                self._json(runs_listing(runs_dir))
            case ["report"]:
                self.policy = report_html.CSP
                self._send(report_html.report_page(read_runs(runs_dir)).encode(), ".html")
            case ["run", name] if run_folder(runs_dir, name) is not None:
                self._static("run.html")
            case ["api", "run", name] if (folder := run_folder(runs_dir, name)) is not None:
                self._json(run_replay(folder))
            case ["run", name, record] if (folder := run_folder(runs_dir, name)) is not None and (
                path := step_file(folder, record)
            ) is not None:
                self._send(path.read_bytes(), ".json")
            case _:
                self._send(NOT_FOUND.encode(), ".html", HTTPStatus.NOT_FOUND)

    def _static(self, name: str) -> None:
        known = {entry.name: entry for entry in STATIC.iterdir() if entry.is_file()}
        entry = known.get(name)
        if entry is None or Path(name).suffix not in (".html", ".js", ".css"):
            self._send(NOT_FOUND.encode(), ".html", HTTPStatus.NOT_FOUND)
            return
        self._send(entry.read_bytes(), Path(name).suffix)

    def _json(self, data: Any) -> None:
        self._send(json.dumps(data, ensure_ascii=False).encode(), ".json")

    def _send(self, body: bytes, kind: str, status: HTTPStatus = HTTPStatus.OK) -> None:
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPES[kind])
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def end_headers(self) -> None:
        """Every response, errors of http.server included, carries the security headers."""
        self.send_header("Content-Security-Policy", self.policy)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the command's output is its URL."""
