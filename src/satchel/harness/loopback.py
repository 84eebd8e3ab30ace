"""An HTTP server served by a daemon thread until it is stopped (the loopback stand-ins, the
view server), and the wait of a command that serves until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

POLL_S = 0.05  # how soon `stop()` is noticed


class Served:
    """`httpd` answering in a daemon thread named `name`, from construction until `stop()`."""

    def __init__(self, httpd: ThreadingHTTPServer, name: str) -> None:
        self.httpd = httpd
        self.port = int(httpd.server_address[1])
        self.thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": POLL_S},
            name=f"{name}:{self.port}",
            daemon=True,
        )
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@contextmanager
def stop_signals() -> Iterator[Callable[[], str]]:
    """SIGINT and SIGTERM are caught inside the block (installed from the main thread, before
    anything is announced); the function it gives waits for one and returns the signal's name.
    The previous handlers are restored on leaving."""
    received: list[int] = []
    stop = threading.Event()

    def stopping(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    def wait() -> str:
        stop.wait()
        return signal.Signals(received[0]).name

    previous = {s: signal.signal(s, stopping) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield wait
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
