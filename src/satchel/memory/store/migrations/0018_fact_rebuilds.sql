-- Rebuilding facts under a new extraction setup: the generations that re-formed a source, the
-- facts each admitted and retired, and the project rebuild jobs with their cursor and counts.

-- One source re-formed under one setup. It goes with its source (erasure, retention).
CREATE TABLE fact_generations (
    id                     uuid PRIMARY KEY,
    project_id             bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    source_observation_id  uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    rebuild_key            uuid NOT NULL,  -- the operator's key (a job's, or one source's)
    extractor_version      text NOT NULL,
    applied_at             timestamptz NOT NULL,
    facts_admitted         integer NOT NULL,
    facts_retired          integer NOT NULL,
    UNIQUE (project_id, rebuild_key, source_observation_id)
);
CREATE INDEX fact_generations_source ON fact_generations (source_observation_id);

-- The generation that admitted a fact, and the one that retired it (its knowledge closed).
ALTER TABLE facts
    ADD COLUMN generation_id uuid REFERENCES fact_generations(id) ON DELETE SET NULL,
    ADD COLUMN reinterpreted_by uuid REFERENCES fact_generations(id) ON DELETE SET NULL;
CREATE INDEX facts_generation ON facts (generation_id) WHERE generation_id IS NOT NULL;
CREATE INDEX facts_reinterpreted ON facts (reinterpreted_by) WHERE reinterpreted_by IS NOT NULL;

-- A project rebuild: log positions and counts only, never source ids, subjects or text, so it
-- stays after an erasure like the log's watermark. At most one is active per project.
CREATE TABLE rebuild_jobs (
    id                 uuid PRIMARY KEY,
    project_id         bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    rebuild_key        uuid NOT NULL,
    extractor_version  text NOT NULL,
    through_offset     bigint,           -- the log's end when the job began (NULL: empty log)
    after_offset       bigint,           -- every source at or below it is done (NULL: none yet)
    sources_rebuilt    bigint NOT NULL DEFAULT 0,
    sources_skipped    bigint NOT NULL DEFAULT 0,
    status             text NOT NULL DEFAULT 'active'
                       CHECK (status IN ('active', 'completed', 'cancelled')),
    cancel_requested   boolean NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, rebuild_key)
);
CREATE UNIQUE INDEX rebuild_jobs_one_active ON rebuild_jobs (project_id) WHERE status = 'active';
