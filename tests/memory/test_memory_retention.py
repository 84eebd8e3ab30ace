"""Retention through the commands and the HTTP API: a policy, a sweep at a moved clock, expired
turns deleted with everything derived from them, receipts with residual 0, kept turns untouched."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import httpx
import pytest
from memory_kit import LiveServer
from memory_process import environment, satchel
from retention_kit import ANN, NEW, OLD, Garden, database_now, later, receipts

from satchel.memory.config import MemorySettings


def retention(live_server: LiveServer, *args: str) -> tuple[int, str, str]:
    done = satchel(
        "retention", *args, "--data-dir", "/nonexistent", env=environment(live_server.database_url)
    )
    return done.returncode, done.stdout, done.stderr


def test_a_sweep_at_a_moved_clock_deletes_expired_turns_and_all_they_formed(
    live_server: LiveServer,
) -> None:
    garden = Garden(live_server, age=20)
    assert retention(live_server, "set", "--project", "alpha", "--days", "30")[0] == 0
    now = garden.database_now()

    code, out, err = retention(live_server, "sweep", "--now", later(now, 5), "--json")
    assert code == 0, err
    (early,) = receipts(out)  # at +5 days the old turns are 25 days old: kept
    assert early["project"] == "alpha" and not any(early["deleted"].values())  # type: ignore[union-attr]
    assert garden.stored(garden.old) == 2
    assert set(garden.showing(OLD)) >= {"recall", "passages", "contexts", "export", "records"}

    code, out, err = retention(live_server, "sweep", "--now", later(now, 15), "--json")
    assert code == 0, err
    (swept,) = receipts(out)  # at +15 days they are 35 days old: expired
    deleted = swept["deleted"]
    assert isinstance(deleted, dict)
    assert (deleted["observation"], deleted["message"]) == (2, 2)
    assert (deleted["fact"], deleted["fact_evidence"], deleted["segment"]) == (1, 1, 1)
    assert swept["clean"] is True and not any(swept["residual"].values())  # type: ignore[union-attr]
    assert swept["residual"]["observation"] == 0  # type: ignore[index]
    assert garden.stored(garden.old) == 0 and garden.vectors(garden.old) == 0
    assert garden.showing(OLD) == []
    assert garden.stored(garden.new) == 2 and garden.vectors(garden.new) == 2
    assert set(garden.showing(NEW)) >= {"recall, project-wide", "passages", "contexts", "export"}

    code, out, err = retention(live_server, "receipts", "--project", "alpha", "--json")
    assert code == 0, err
    listed = [r["id"] for r in receipts(out)]  # the last: the sweep `set` ran, deleting nothing
    assert len(listed) == 3 and listed[:2] == [swept["id"], early["id"]]
    code, out, err = retention(live_server, "show", "--json")
    assert code == 0 and receipts(out)[0]["days"] == 30, err


SMALL = MemorySettings(artifact_object_bytes=8, artifact_bytes=12, artifact_objects=2)


@pytest.mark.parametrize("memory_settings", [SMALL], ids=["8-byte objects, 12 bytes, 2 objects"])
def test_a_project_full_of_artifacts_accepts_a_put_once_they_are_swept(
    live_server: LiveServer, alpha: httpx.Client
) -> None:
    def put(content: bytes) -> httpx.Response:
        body = {
            "id": str(uuid.uuid4()),
            "data_subject_id": ANN,
            "kind": "state",
            "content": base64.b64encode(content).decode(),
        }
        return alpha.post("/v1/artifacts/put", json=body)

    assert [put(b"12345678").status_code, put(b"1234").status_code] == [200, 200]
    assert put(b"1").json()["error"]["code"] == "storage_capacity"
    moved = later(database_now(live_server.database_url), 31)  # artifacts live 30 days
    code, out, err = retention(live_server, "sweep", "--project", "alpha", "--now", moved, "--json")
    assert code == 0, err
    (swept,) = receipts(out)  # no policy: the receipt is for the expired artifacts
    assert swept["deadline"] is None
    assert swept["deleted"] == {"agent_artifact": 2} and swept["residual"] == {"agent_artifact": 0}
    assert alpha.post("/v1/artifacts/list", json={"data_subject_id": ANN}).json()["artifacts"] == []
    assert put(b"12345678").status_code == 200


def test_retention_commands_refuse_what_they_cannot_do(live_server: LiveServer) -> None:
    live_server.token("alpha")
    code, _, err = retention(live_server, "set", "--project", "nowhere", "--days", "3")
    assert code == 2 and "'nowhere'" in err and "satchel tokens create" in err
    code, _, err = retention(live_server, "set", "--project", "alpha", "--days", "0")
    assert code == 2 and "--days" in err and "not 0" in err
    args = ("set", "--project", "alpha", "--days", "3", "--inactive-after", "-1")
    code, _, err = retention(live_server, *args)
    assert code == 2 and "--inactive-after" in err and "not -1" in err
    code, _, err = retention(live_server, "sweep", "--now", "tomorrow")
    assert code == 2 and "'tomorrow'" in err
    code, _, err = retention(live_server, "sweep", "--now", "2030-01-01T00:00:00")
    assert code == 2 and "zone" in err
    code, _, err = retention(live_server, "clear", "--project", "nowhere")
    assert code == 2 and "'nowhere'" in err
    code, out, err = retention(live_server, "clear", "--project", "alpha")
    assert code == 0 and "had no policy" in out, err
    code, out, err = retention(live_server, "show", "--project", "alpha", "--json")
    assert code == 0 and out == "", err
    assert retention(live_server, "set", "--project", "alpha", "--days", "3")[0] == 0
    code, out, err = retention(live_server, "show")
    assert code == 0 and "alpha" in out, err
    code, out, err = retention(live_server, "clear", "--project", "alpha")
    assert code == 0 and "had no policy" not in out, err


def test_a_data_dir_without_a_deployment_is_named(tmp_path: Path) -> None:
    done = satchel("retention", "show", "--data-dir", str(tmp_path), env=environment(None))
    assert done.returncode == 2 and "no satchel deployment" in done.stderr


def test_a_policy_that_expires_turns_at_once_deletes_them_before_the_command_ends(
    live_server: LiveServer,
) -> None:
    garden = Garden(live_server, age=20)
    code, out, err = retention(live_server, "set", "--project", "alpha", "--days", "10")
    assert code == 0, err
    assert "alpha" in out and "observation=2" in out, out
    assert garden.stored(garden.old) == 0 and garden.vectors(garden.old) == 0  # before any read
    assert garden.stored(garden.new) == 2
