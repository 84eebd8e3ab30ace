-- Notifications: the HTTPS endpoints a project registered, and one delivery row each time its
-- formed watermark moved forward, written in the transaction that moved it and sent afterwards
-- by the worker. Neither names a data subject or holds content.

-- An endpoint: where deliveries go and the secret that signs them (the sender must read it).
CREATE TABLE notification_endpoints (
    id           uuid PRIMARY KEY,
    project_id   bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    url          text NOT NULL,
    secret       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    disabled_at  timestamptz
);
CREATE INDEX notification_endpoints_project ON notification_endpoints (project_id, created_at, id);

-- A delivery: the offsets it carries, its attempts and how it ended. While it was never
-- attempted, a later move of the watermark updates its offsets instead of adding a row.
-- `last_error` is one of a fixed set of categories, never a raw error or an address.
CREATE TABLE notification_deliveries (
    id               uuid PRIMARY KEY,
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    endpoint_id      uuid NOT NULL REFERENCES notification_endpoints(id) ON DELETE CASCADE,
    formed_through   bigint NOT NULL,
    stored_through   bigint NOT NULL,
    parked_turns     bigint NOT NULL,
    occurred_at      timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    parked_at        timestamptz,
    last_status      integer,
    last_error       text CHECK (
        last_error IS NULL
        OR last_error IN (
            'destination not permitted', 'address not permitted', 'redirect not followed',
            'timeout', 'connection refused', 'tls failure', 'network error', 'endpoint disabled'
        )
        OR last_error ~ '^destination (answered|refused with) [0-9]{3}$'
    )
);
-- What the sender claims next: deliveries neither delivered nor parked, by when they are due.
CREATE INDEX notification_deliveries_due ON notification_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND parked_at IS NULL;
CREATE INDEX notification_deliveries_project ON notification_deliveries
    (project_id, created_at DESC, id);
