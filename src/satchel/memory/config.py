"""Settings of the memory deployment, read from `SATCHEL_*` environment variables."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

DEFAULT_DATA_DIR = Path.home() / ".local" / "share" / "satchel"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_BODY_TIMEOUT = 10.0
DEFAULT_MODEL_TIMEOUT = 120.0  # seconds: a small local model on a CPU answers slowly
DEFAULT_MODEL_RETRIES = 1
MAX_MODEL_RETRIES = 10
MAX_ATTEMPTS = 100  # the most failed formations of a turn before it is parked
KIB = 1024
MAX_ARTIFACT_OBJECT_BYTES = 512 * KIB  # the most any allowance may admit for one artifact
MAX_ARTIFACT_BYTES = 1024 * KIB * KIB
MAX_ARTIFACT_OBJECTS = 100_000
MAX_BACKLOG = 1_000_000
MAX_POOL_SIZE = 262_143  # PostgreSQL's own ceiling on max_connections
MAX_EMBEDDING_THREADS = 64
DEFAULT_WORKER_AGE = 300.0  # seconds: a worker that reported in this recently is alive
DEFAULT_NOTIFY_TIMEOUT = 10.0  # seconds one delivery attempt may take
MAX_NOTIFY_ATTEMPTS = 20
HOST_ENTRY = re.compile(r"\.?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
YES = ("true", "on", "yes", "1")
NO = ("false", "off", "no", "0")


@dataclass(frozen=True, slots=True)
class ModelClientSettings:
    """An OpenAI-compatible chat endpoint: model, base URL, the NAME of the key's variable, and
    the hosts that may receive text (a base URL on any other host is refused); `timeout`:
    seconds one request may take, `retries`: how many times a request that timed out, could
    not connect, or was answered 408, 409, 429 or 5xx is sent again."""

    model: str
    base_url: str
    api_key_env: str | None = None
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    timeout: float = DEFAULT_MODEL_TIMEOUT
    retries: int = DEFAULT_MODEL_RETRIES


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """Where notifications may go and how they are sent: `destinations`, the hosts allowed (an
    exact name, or `.example.com` for its subdomains); `permit_private`: a destination may be an
    address only the deployment can reach; `backoff`: seconds before the first retry (doubling
    after each failed attempt); `attempts`: the most attempts before a delivery is parked;
    `timeout`: seconds one attempt may take; `ca_file`: extra certificates to trust."""

    destinations: tuple[str, ...]
    permit_private: bool = False
    backoff: float = 5.0
    attempts: int = 6
    timeout: float = DEFAULT_NOTIFY_TIMEOUT
    ca_file: Path | None = None


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """Where the data lives and the limits the service enforces.

    `form_on_store`: with no formation worker, a stored turn counts as formed at once, so the
    watermark and contexts move with the log. A deployment running the worker turns it off.
    `formation`: the extraction model (None: turns are formed without facts).
    `formation_backoff`: seconds before the first retry of a failed turn (doubling after each
    failure); after `formation_attempts` failures the turn is parked.
    `artifact_object_bytes`, `artifact_bytes`, `artifact_objects`: each project's artifact
    allowance (one object's bytes, all its objects' bytes, how many); beyond it a put is 429
    `storage_capacity`. `backlog_limit`: how many of a project's turns may wait unformed before
    an observation is 429 `rate_limited`. `pool_size`: the connections of an API process's pool.
    `retention_interval`: seconds between two retention sweeps of a worker (its first sweep is
    on its first pass). `embedding_threads`: how many texts a worker's local model embeds at
    once, each on a thread (and a core) of its own.
    `metrics`: serve `GET /metrics`; `metrics_address`: on a listener of its own at this
    (host, port) instead of the API's; `metrics_per_project`: series by project name as well.
    `require_worker`: `/ready` says not ready unless a worker reported in within this many
    seconds (None: a worker is not required).
    `notify`: where and how notifications are sent (None: no destination, none are).
    """

    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str | None = None
    recall_budget: int = 16_000
    max_rows: int = 200
    work_limit: int = 32
    project_limit: int = 16
    token_limit: int = 8
    pool_size: int = 16
    form_on_store: bool = True
    formation: ModelClientSettings | None = None
    formation_backoff: float = 30.0
    formation_max_backoff: float = 3_600.0
    formation_attempts: int = 6
    formation_batch: int = 64
    embedding_threads: int = 2
    worker_poll: float = 1.0
    body_timeout: float = DEFAULT_BODY_TIMEOUT  # seconds an admitted request's body may take
    artifact_object_bytes: int = 256 * KIB
    artifact_bytes: int = 16 * KIB * KIB
    artifact_objects: int = 128
    backlog_limit: int = 100_000
    retention_interval: float = 3_600.0
    metrics: bool = True
    metrics_address: tuple[str, int] | None = None
    metrics_per_project: bool = False
    require_worker: float | None = None
    notify: NotifySettings | None = None

    def for_worker(self) -> MemorySettings:
        """The same settings for a deployment whose turns a worker forms."""
        return replace(self, form_on_store=False)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, data_dir: str | Path | None = None
    ) -> MemorySettings:
        env = os.environ if env is None else env
        folder = data_dir or env.get("SATCHEL_DATA_DIR") or DEFAULT_DATA_DIR
        default = cls()
        object_bytes = _count(
            env,
            "SATCHEL_ARTIFACT_OBJECT_BYTES",
            default.artifact_object_bytes,
            MAX_ARTIFACT_OBJECT_BYTES,
        )
        return cls(
            data_dir=Path(folder).expanduser(),
            database_url=env.get("SATCHEL_DATABASE_URL") or None,
            formation=formation_from_env(env),
            formation_backoff=_seconds(env, "SATCHEL_FORMATION_BACKOFF", default.formation_backoff),
            formation_attempts=_count(
                env, "SATCHEL_FORMATION_ATTEMPTS", default.formation_attempts, MAX_ATTEMPTS
            ),
            body_timeout=_seconds(env, "SATCHEL_BODY_TIMEOUT", DEFAULT_BODY_TIMEOUT),
            artifact_object_bytes=object_bytes,
            artifact_bytes=_count(
                env,
                "SATCHEL_ARTIFACT_BYTES",
                max(default.artifact_bytes, object_bytes),
                MAX_ARTIFACT_BYTES,
                least=object_bytes,
            ),
            artifact_objects=_count(
                env, "SATCHEL_ARTIFACT_OBJECTS", default.artifact_objects, MAX_ARTIFACT_OBJECTS
            ),
            backlog_limit=_count(env, "SATCHEL_BACKLOG_LIMIT", default.backlog_limit, MAX_BACKLOG),
            pool_size=_count(env, "SATCHEL_POOL_SIZE", default.pool_size, MAX_POOL_SIZE),
            embedding_threads=_count(
                env, "SATCHEL_EMBEDDING_THREADS", default.embedding_threads, MAX_EMBEDDING_THREADS
            ),
            retention_interval=_seconds(
                env, "SATCHEL_RETENTION_INTERVAL", default.retention_interval
            ),
            metrics=_switch(env, "SATCHEL_METRICS", default.metrics),
            metrics_address=_address(env, "SATCHEL_METRICS_ADDRESS"),
            metrics_per_project=_switch(
                env, "SATCHEL_METRICS_PER_PROJECT", default.metrics_per_project
            ),
            require_worker=_worker_age(env, "SATCHEL_REQUIRE_WORKER"),
            notify=notify_from_env(env),
        )


class SettingError(ValueError):
    """A `SATCHEL_*` variable holds a value the service cannot use."""


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of seconds from `env[name]`, or `default` when it is unset."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise SettingError(f"{name} must be a number of seconds, not {text!r}") from None
    if not 0 < value < float("inf"):
        raise SettingError(f"{name} must be a positive number of seconds, not {text!r}")
    return value


def _count(env: Mapping[str, str], name: str, default: int, most: int, *, least: int = 1) -> int:
    """A whole number in `least..most` from `env[name]`, or `default` when it is unset."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingError(f"{name} must be a whole number, not {text!r}") from None
    if not least <= value <= most:
        raise SettingError(f"{name} must be from {least} to {most}, not {text!r}")
    return value


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """On or off from `env[name]` (true/on/yes/1, false/off/no/0), or `default` when unset."""
    text = env.get(name, "").strip().lower()
    if not text:
        return default
    if text in YES or text in NO:
        return text in YES
    raise SettingError(f"{name} must be on or off (true/false), not {text!r}")


def _worker_age(env: Mapping[str, str], name: str) -> float | None:
    """Seconds from `env[name]`: a number, `true` for `DEFAULT_WORKER_AGE`, `false` for None."""
    text = env.get(name, "").strip().lower()
    if not text or text in ("false", "off", "no"):
        return None
    if text in ("true", "on", "yes"):
        return DEFAULT_WORKER_AGE
    return _seconds(env, name, DEFAULT_WORKER_AGE)


def _address(env: Mapping[str, str], name: str) -> tuple[str, int] | None:
    """`(host, port)` from `env[name]` written `host:port` (`[::1]:port` for IPv6), or None."""
    text = env.get(name, "").strip()
    if not text:
        return None
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65_536:
        raise SettingError(f"{name} must be host:port (e.g. 127.0.0.1:9464), not {text!r}")
    return host, int(port)


def formation_from_env(env: Mapping[str, str]) -> ModelClientSettings | None:
    """`SATCHEL_FORMATION_MODEL` and `_BASE_URL` (both, or no model), `_API_KEY_ENV` (the name
    of the variable holding the key), `_ALLOWED_HOSTS` (comma-separated; default loopback),
    `_TIMEOUT` (seconds a request may take) and `_RETRIES` (resends of a failed request)."""
    model = env.get("SATCHEL_FORMATION_MODEL", "").strip()
    base_url = env.get("SATCHEL_FORMATION_BASE_URL", "").strip()
    if not model or not base_url:
        return None
    hosts = tuple(
        h.strip().lower() for h in env.get("SATCHEL_FORMATION_ALLOWED_HOSTS", "").split(",")
    )
    return ModelClientSettings(
        model=model,
        base_url=base_url,
        api_key_env=env.get("SATCHEL_FORMATION_API_KEY_ENV", "").strip() or None,
        allowed_hosts=tuple(h for h in hosts if h) or LOOPBACK_HOSTS,
        timeout=_seconds(env, "SATCHEL_FORMATION_TIMEOUT", DEFAULT_MODEL_TIMEOUT),
        retries=_count(
            env, "SATCHEL_FORMATION_RETRIES", DEFAULT_MODEL_RETRIES, MAX_MODEL_RETRIES, least=0
        ),
    )


def notify_from_env(env: Mapping[str, str]) -> NotifySettings | None:
    """`SATCHEL_NOTIFY_DESTINATIONS` (comma-separated hosts; unset: None), `_PERMIT_PRIVATE`,
    `_BACKOFF`, `_ATTEMPTS`, `_TIMEOUT` and `_CA_FILE`."""
    name = "SATCHEL_NOTIFY_DESTINATIONS"
    entries = [h.strip().lower() for h in env.get(name, "").split(",")]
    hosts = tuple(h for h in entries if h)
    if not hosts:
        return None
    for host in hosts:
        if not HOST_ENTRY.fullmatch(host):
            raise SettingError(
                f"{name} holds {host!r}: each entry must be a host name (hooks.example.com) or"
                " a dot and a domain (.example.com), with no scheme, port or path"
            )
    default = NotifySettings(hosts)
    ca_text = env.get("SATCHEL_NOTIFY_CA_FILE", "").strip()
    if ca_text and not Path(ca_text).expanduser().is_file():
        raise SettingError(f"SATCHEL_NOTIFY_CA_FILE must name a certificate file, not {ca_text!r}")
    return NotifySettings(
        destinations=hosts,
        permit_private=_switch(env, "SATCHEL_NOTIFY_PERMIT_PRIVATE", default.permit_private),
        backoff=_seconds(env, "SATCHEL_NOTIFY_BACKOFF", default.backoff),
        attempts=_count(env, "SATCHEL_NOTIFY_ATTEMPTS", default.attempts, MAX_NOTIFY_ATTEMPTS),
        timeout=_seconds(env, "SATCHEL_NOTIFY_TIMEOUT", default.timeout),
        ca_file=Path(ca_text).expanduser() if ca_text else None,
    )
