-- Retention: a project's policy (how many days its turns are kept, counted from when each was
-- stored; optionally after how many idle days a subject is reported) and the receipt of each
-- sweep that applied it.
CREATE TABLE retention_policies (
    project_id           bigint PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    keep_days            integer NOT NULL CHECK (keep_days >= 1),
    inactive_after_days  integer CHECK (inactive_after_days >= 1),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- One row a project a sweep: the clock it used, the deadline that clock gave (NULL without a
-- policy: only expired artifacts went), rows deleted and rows left per kind, idle subjects.
CREATE TABLE retention_sweeps (
    id          uuid PRIMARY KEY,
    project_id  bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    swept_at    timestamptz NOT NULL DEFAULT now(),
    now_used    timestamptz NOT NULL,
    deadline    timestamptz,
    deleted     jsonb NOT NULL,
    residual    jsonb NOT NULL,
    inactive    jsonb NOT NULL DEFAULT '[]'
);
CREATE INDEX retention_sweeps_page ON retention_sweeps (project_id, swept_at DESC, id DESC);

-- A project's observed turns by when they were stored: the sweep finds its expired turns, and a
-- read under a policy tells in one probe whether any turn it could meet has expired.
CREATE INDEX observations_stored ON observations (project_id, stored_at) WHERE kind = 'turn';

-- A policy set, changed or cleared tells the services listening on `satchel_credentials`, as a
-- token change does: a remembered grant says whether its project has a policy.
CREATE TRIGGER retention_policies_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON retention_policies FOR EACH STATEMENT EXECUTE FUNCTION credentials_changed();
