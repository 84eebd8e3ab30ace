"""`satchel view` as a process, without a browser: every answer carries the security headers, a
run is addressed only by one of the directory's folders, the step records and the data are
JSON, and the command's refusals and its stop are one line each."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from harness.test_sweeps import environment
from harness.view_kit import (
    GAMES,
    MARKUP,
    PLAIN,
    TRICKY,
    WAIT_S,
    command,
    fetch,
    make_runs,
    run_folders,
    viewing,
)
from satchel.harness.report_html import CSP as REPORT_CSP
from satchel.harness.view import CSP


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_runs(tmp_path_factory.mktemp("view"))


def test_every_answer_has_its_policy_and_an_unknown_or_escaping_folder_is_404(
    runs_dir: Path, tmp_path: Path
) -> None:
    folder = run_folders(runs_dir)[(TRICKY, "lamp-0001")]
    (runs_dir / "outside").symlink_to(tmp_path)
    try:
        with viewing(runs_dir) as (url, _):
            pages = {
                "": 200,
                "static/runs.js": 200,
                "api/runs": 200,
                f"run/{folder}": 200,
                f"api/run/{folder}": 200,
                f"run/{folder}/step_001.json": 200,
                "report": 200,
                "run/..": 404,
                "run/%2e%2e": 404,
                "api/run/..": 404,
                "run/outside": 404,
                "run/no-such-run": 404,
                f"run/{folder}/run_meta.json": 404,
                f"run/{folder}/..%2fsweep.json": 404,
                "static/..%2freplay.py": 404,
            }
            for path, status in pages.items():
                answer = fetch(url + path)
                assert answer.status == status, path
                policy = REPORT_CSP if path == "report" else CSP
                assert answer.headers["Content-Security-Policy"] == policy, path
                assert answer.headers["X-Content-Type-Options"] == "nosniff", path
                assert answer.headers["Referrer-Policy"] == "no-referrer", path
            step = fetch(f"{url}run/{folder}/step_001.json")
            assert step.headers["Content-Type"] == "application/json"
            assert step.body == (runs_dir / folder / "step_001.json").read_bytes()
            page = fetch(f"{url}run/{folder}").body.decode()
            assert folder not in page and "<script src=" in page  # a static page, no data in it
    finally:
        (runs_dir / "outside").unlink()


def test_the_data_are_the_records(runs_dir: Path) -> None:
    folders = run_folders(runs_dir)
    with viewing(runs_dir) as (url, _):
        listing = json.loads(fetch(url + "api/runs").body)
        replay = json.loads(fetch(f"{url}api/run/{folders[(TRICKY, 'lamp-0001')]}").body)
    assert {(run["config"], run["game"]) for run in listing["runs"]} == set(folders)
    assert listing["sweep"] == {
        "configs": [PLAIN, TRICKY],
        "games": list(GAMES),
        "pairs": 4,
        "ended": 4,
    }
    first = replay["steps"][0]
    assert first["response"].startswith(MARKUP)
    assert first["retries"] == [{"attempt": 1, "kind": "transient"}]
    assert replay["compactions"] and all(p["summary"] for p in replay["compactions"])
    record = json.loads((runs_dir / folders[(TRICKY, "lamp-0001")] / "step_001.json").read_text())
    assert first["observation"]["frames"] == record["observation"]["frames"]


def test_a_missing_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        command(tmp_path / "nothing"),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert f"no runs directory '{tmp_path / 'nothing'}'" in line and "--runs-dir" in line
    assert not done.stdout


def test_a_taken_port_is_named_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            command(tmp_path, "--port", str(port)),
            env=environment(),
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=False,
        )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert f"port {port} on 127.0.0.1 is taken" in line and "--port" in line


def test_sigterm_stops_it_in_one_line(tmp_path: Path) -> None:
    with viewing(tmp_path) as (url, process):
        assert fetch(url).status == 200
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0, err
    assert out.strip() == "stopped (SIGTERM)" and not err
