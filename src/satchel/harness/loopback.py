"""An HTTP server served by a daemon thread until it is stopped (the loopback stand-ins)."""

from __future__ import annotations

import threading
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
