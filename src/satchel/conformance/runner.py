"""The runner: drives one long-lived driver process through every case, behind the fault proxy.

For each case it makes a fresh subject, asserts the case's seed facts, reads the log's `stored`
before and after, tells the driver the turn (as often as the case repeats it) and judges the
outcome. The driver's stdout carries reports only; its stderr goes to a log whose tail is shown
when the driver dies or answers something that is not a report.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
from pydantic import ValidationError

from satchel.conformance.cases import Case
from satchel.conformance.drivers import SHIPPED
from satchel.conformance.judge import judge
from satchel.conformance.proxy import OBSERVATIONS, FaultProxy, serving
from satchel.integrations.driver import Instruction, Report
from satchel.memory.client import MemoryClient, MemoryServiceError

REPORT_TIMEOUT = 120.0
RETRIES = 6


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one case: passed when `failures` is empty."""

    case: str
    rule: str
    passed: bool
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "case": self.case,
            "rule": self.rule,
            "passed": self.passed,
            "failures": self.failures,
        }


class DriverBroken(RuntimeError):
    """The driver died, hung, or wrote something that is not a report; the run cannot go on."""


def _with_backoff[T](call: Callable[[], T]) -> T:
    """Run one of the runner's own requests, retrying when the deployment answers 429."""
    delay = 0.25
    for _ in range(RETRIES):
        try:
            return call()
        except MemoryServiceError as error:
            if error.status != 429:
                raise
        time.sleep(delay)
        delay *= 2
    return call()


def _stored(client: MemoryClient) -> int:
    stored = _with_backoff(client.freshness).stored
    return -1 if stored is None else stored


def _seed(client: MemoryClient, case: Case, subject: str) -> None:
    if not case.seed:
        return
    records = [
        {"idempotency_key": str(uuid.uuid4()), "data_subject_id": subject, **fact.model_dump()}
        for fact in case.seed
    ]
    _with_backoff(lambda: client.assert_records(records))


def driver_environment() -> dict[str, str]:
    """This environment, with the folder of the Python running satchel first on PATH, so a
    driver command naming `python` gets the interpreter that has satchel installed."""
    folder = os.path.dirname(sys.executable)
    return {**os.environ, "PATH": os.pathsep.join([folder, os.environ.get("PATH", "")])}


class UsageError(ValueError):
    """The command names a driver that cannot run, or a deployment that does not answer."""


def check_driver(given: str, command: Sequence[str]) -> None:
    """Refuse a driver command whose program is neither on the drivers' PATH nor a file that
    can be run, before any case starts."""
    program = command[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        runnable = os.path.isfile(program) and os.access(program, os.X_OK)
        why = f"{program!r} is not an executable file"
    else:
        runnable = shutil.which(program, path=driver_environment()["PATH"]) is not None
        why = f"{program!r} is not found on PATH"
    if not runnable:
        names = ", ".join(driver.name for driver in SHIPPED)
        raise UsageError(
            f"--driver {given!r} is neither a shipped driver ({names}) nor a command that can "
            f"be run: {why}"
        )


def check_api(api: str, token: str) -> None:
    """Refuse a deployment that does not answer, or refuses the token, before any case."""
    try:
        with MemoryClient(api, token, timeout=10) as client:
            client.freshness()
    except (httpx.InvalidURL, ValueError) as error:
        raise UsageError(f"--api {api!r} is not a usable address: {error}") from None
    except MemoryServiceError as error:
        if error.status == 0:
            raise UsageError(
                f"--api {api}: no deployment answers there ({error.message})"
            ) from None
        if error.status == 401:
            raise UsageError(
                f"--api {api} refuses the token (401 unauthenticated): pass the --token "
                "(or SATCHEL_TOKEN) of a project of that deployment"
            ) from None
        if error.status != 429:
            raise UsageError(
                f"--api {api} does not answer as a memory deployment "
                f"(GET /v1/freshness: {error.status} {error.code})"
            ) from None


class Driver:
    """The driver process: one instruction line in, one report line out."""

    def __init__(self, command: Sequence[str], log: IO[str], log_path: Path) -> None:
        self.log_path = log_path
        try:
            self.process = subprocess.Popen(
                list(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                env=driver_environment(),
            )
        except OSError as error:
            raise DriverBroken(f"the driver {list(command)} could not start: {error}") from None
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        kept = text.splitlines()[-lines:]
        return "\n".join(kept) if kept else "(the driver wrote nothing to stderr)"

    def _broken(self, why: str) -> DriverBroken:
        """Stop the driver, so its stderr is complete, and say why the run cannot go on."""
        self.close(grace=5)
        return DriverBroken(f"{why}\n--- the driver's stderr (last lines) ---\n{self.tail()}")

    def ask(self, instruction: Instruction, timeout: float) -> Report:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(instruction.model_dump_json() + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._broken(self._exit_text("the driver exited before reporting")) from None
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise self._broken(f"the driver gave no report within {timeout:.0f} s") from None
        if line is None:
            raise self._broken(self._exit_text("the driver exited before reporting"))
        try:
            return Report.model_validate_json(line)
        except ValidationError:
            shown = line.strip()[:200]
            raise self._broken(f"the driver wrote a line that is not a report: {shown!r}") from None

    def _exit_text(self, what: str) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return what
        return f"{what} (exit status {code})"

    def close(self, grace: float = 15) -> None:
        """Close the driver's stdin and let it exit; kill it after `grace` seconds."""
        if self.process.stdin is not None:
            with suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def _driver(command: Sequence[str]) -> Iterator[Driver]:
    with tempfile.TemporaryDirectory(prefix="satchel-driver-") as folder:
        log_path = Path(folder) / "stderr.log"
        with log_path.open("w", encoding="utf-8") as log:
            driver = Driver(command, log, log_path)
            try:
                yield driver
            finally:
                driver.close()


def run_case(
    case: Case,
    driver: Driver,
    proxy: FaultProxy,
    client: MemoryClient,
    *,
    proxy_url: str,
    token: str,
    timeout: float = REPORT_TIMEOUT,
) -> CaseResult:
    """One case from seed to verdict; `DriverBroken` propagates, the rest is a failure."""
    subject = str(uuid.uuid4())
    try:
        _seed(client, case, subject)
        before = _stored(client)
    except MemoryServiceError as error:
        return CaseResult(
            case.name, case.rule, False, [f"setup: seeding or freshness failed: {error}"]
        )
    proxy.configure(case.faults, case.context)
    instruction = Instruction(
        case=case.name, api=proxy_url, token=token, data_subject_id=subject, turn=case.turn
    )
    reports: list[Report] = []
    for attempt in range(max(1, case.turn.repeat)):
        if attempt:
            time.sleep(case.turn.repeat_after_ms / 1000)
        reports.append(driver.ask(instruction, timeout))
    try:
        after = _stored(client)
    except MemoryServiceError as error:
        return CaseResult(case.name, case.rule, False, [f"stored: freshness failed: {error}"])
    observes = [e.body for e in proxy.requests("POST", OBSERVATIONS)]
    failures = judge(case, reports, observes, after - before)
    return CaseResult(case.name, case.rule, not failures, failures)


def run_suite(
    command: Sequence[str],
    cases: Sequence[Case],
    *,
    api: str,
    token: str,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every case through the driver `command` against the deployment at `api`."""
    results: list[CaseResult] = []

    def record(result: CaseResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    with serving(api) as (proxy, proxy_url), MemoryClient(api, token) as client:
        broken = ""
        try:
            with _driver(command) as driver:
                for case in cases:
                    try:
                        result = run_case(
                            case, driver, proxy, client, proxy_url=proxy_url, token=token
                        )
                    except DriverBroken as error:
                        broken = str(error)
                        result = CaseResult(case.name, case.rule, False, [f"driver: {broken}"])
                    record(result)
                    if broken:
                        break
        except DriverBroken as error:
            broken = str(error)
            if len(results) < len(cases):
                first = cases[len(results)]
                record(CaseResult(first.name, first.rule, False, [f"driver: {broken}"]))
        for case in cases[len(results) :]:
            why = f"driver: not run, the driver is gone ({broken.splitlines()[0]})"
            record(CaseResult(case.name, case.rule, False, [why]))
    return results
