-- Formation workers report in here: one row a worker process, written when it starts and again
-- as it works (its heartbeat), so readiness, metrics and the operator's health report see from
-- any process whether a worker is alive and what it has done, with no state of their own.
-- Several workers (on several hosts) share a database; each has its own row. A row is kept after
-- its worker stops (`stopped_at`), so the totals summed over the rows only ever grow.
CREATE TABLE workers (
    id               uuid PRIMARY KEY,
    host             text NOT NULL,
    pid              integer NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT now(),
    beat_at          timestamptz NOT NULL DEFAULT now(),
    stopped_at       timestamptz,
    formed           bigint NOT NULL DEFAULT 0,  -- turns this worker formed
    failed           bigint NOT NULL DEFAULT 0,  -- failed formation attempts (parked ones too)
    embedded         bigint NOT NULL DEFAULT 0,  -- messages this worker embedded
    last_failure     text,                       -- what failed last: a category, never content
    last_failure_at  timestamptz
);
-- The freshest beat of the running workers, read by readiness probes and scrapes.
CREATE INDEX workers_running ON workers (beat_at) WHERE stopped_at IS NULL;
