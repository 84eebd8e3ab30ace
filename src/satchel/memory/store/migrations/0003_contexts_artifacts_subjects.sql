-- Contexts, artifacts and subjects: segment sizes, per-project artifact ids with expiry, subject digests.

-- A segment's size in characters, read by context assembly without loading the summary.
ALTER TABLE segments
    ADD COLUMN characters integer GENERATED ALWAYS AS (length(summary)) STORED;

-- Artifact ids are chosen by callers, so they are unique per project, not globally: one project
-- using an id must not make it a conflict (and so visible) in another.
ALTER TABLE artifacts DROP CONSTRAINT artifacts_pkey;
ALTER TABLE artifacts ADD PRIMARY KEY (project_id, id);
ALTER TABLE artifacts
    ADD COLUMN expires_at timestamptz NOT NULL DEFAULT now() + interval '720 hours';
CREATE INDEX artifacts_source ON artifacts (source_observation_id);

-- The registration's fingerprint (for replays) and the last write's (for a retried update).
ALTER TABLE subjects
    ADD COLUMN request_digest bytea NOT NULL DEFAULT ''::bytea,
    ADD COLUMN last_digest bytea NOT NULL DEFAULT ''::bytea;
