-- The base schema: projects, tokens, the observation log, facts, artifacts and their bookkeeping.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE projects (
    id            bigserial PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    suspended_at  timestamptz,
    stored        bigint,            -- highest claimed log offset; NULL before the first append
    formed        bigint             -- recomputed watermark; see freshness
);

CREATE TABLE tokens (
    id          uuid PRIMARY KEY,
    project_id  bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name        text NOT NULL,
    digest      bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    access      text NOT NULL CHECK (access IN ('read_only', 'read_write')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE observations (
    id               uuid PRIMARY KEY,
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    log_offset       bigint NOT NULL,
    data_subject_id  text,
    kind             text NOT NULL DEFAULT 'turn' CHECK (kind IN ('turn', 'curated', 'artifact')),
    occurred_at      timestamptz NOT NULL,
    stored_at        timestamptz NOT NULL DEFAULT now(),
    formed_at        timestamptz,
    parked_at        timestamptz,
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    next_attempt_at  timestamptz,
    UNIQUE (project_id, log_offset)
);
CREATE INDEX observations_subject ON observations (project_id, data_subject_id, log_offset);
CREATE INDEX observations_unformed ON observations (project_id, log_offset)
    WHERE formed_at IS NULL AND parked_at IS NULL;

CREATE TABLE messages (
    id               uuid PRIMARY KEY,           -- the chunk id
    observation_id   uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    project_id       bigint NOT NULL,
    data_subject_id  text,
    ordinal          integer NOT NULL,
    role             text NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content          text NOT NULL,
    group_ordinal    integer NOT NULL,
    occurred_at      timestamptz NOT NULL,
    UNIQUE (observation_id, ordinal)
);
CREATE INDEX messages_project ON messages (project_id, data_subject_id);

-- Idempotency keys (digests only) and content fingerprints; observation_id NULL is a tombstone.
CREATE TABLE retry_keys (
    project_id      bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    key_digest      bytea NOT NULL,
    fingerprint     bytea NOT NULL,
    observation_id  uuid,
    PRIMARY KEY (project_id, key_digest)
);
CREATE INDEX retry_keys_observation ON retry_keys (observation_id);

CREATE TABLE entities (
    id               uuid PRIMARY KEY,
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id  text,
    name             text NOT NULL,
    normalized       text NOT NULL,
    kind             text NOT NULL DEFAULT 'named',
    source_observation_id uuid REFERENCES observations(id) ON DELETE CASCADE,
    first_seen_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entities_lookup ON entities (project_id, normalized);
CREATE INDEX entities_source ON entities (source_observation_id);

CREATE TABLE facts (
    id                     uuid PRIMARY KEY,
    project_id             bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id        text,
    subject_entity_id      uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    predicate              text NOT NULL,
    object                 text NOT NULL,
    object_entity_id       uuid REFERENCES entities(id) ON DELETE SET NULL,
    statement              text NOT NULL,
    confidence             double precision NOT NULL DEFAULT 1.0,
    source_role            text NOT NULL DEFAULT 'user',
    source_observation_id  uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    version                uuid NOT NULL,
    valid_from             timestamptz NOT NULL,
    valid_until            timestamptz,
    known_from             timestamptz NOT NULL DEFAULT now(),
    known_until            timestamptz,
    retracted_at           timestamptz,
    superseded_by          uuid,
    authored               boolean NOT NULL DEFAULT false,
    recorded_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX facts_subject ON facts (project_id, subject_entity_id) WHERE known_until IS NULL;
CREATE INDEX facts_object ON facts (project_id, object_entity_id) WHERE known_until IS NULL;
CREATE INDEX facts_source ON facts (source_observation_id);

CREATE TABLE fact_history (
    id                      uuid PRIMARY KEY,
    fact_id                 uuid NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    valid_from              timestamptz,
    valid_until             timestamptz,
    known_from              timestamptz,
    known_until             timestamptz,
    ended_by_observation_id uuid
);

CREATE TABLE fact_evidence (
    fact_id          uuid NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    observation_id   uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    message_id       uuid REFERENCES messages(id) ON DELETE SET NULL,
    source_ordinal   integer NOT NULL,
    quote            text NOT NULL,
    byte_start       integer NOT NULL,
    byte_end         integer NOT NULL,
    PRIMARY KEY (fact_id, observation_id, source_ordinal)
);

CREATE TABLE segments (
    id               uuid PRIMARY KEY,
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id  text,
    level            integer NOT NULL CHECK (level BETWEEN 1 AND 6),
    from_offset      bigint NOT NULL,
    to_offset        bigint NOT NULL,
    covered          integer NOT NULL,
    summary          text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX segments_subject ON segments (project_id, data_subject_id, from_offset);

CREATE TABLE segment_sources (
    segment_id      uuid NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
    observation_id  uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    PRIMARY KEY (segment_id, observation_id)
);

CREATE TABLE artifacts (
    id                     uuid PRIMARY KEY,
    project_id             bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id        text NOT NULL,
    kind                   text NOT NULL CHECK (kind IN ('state', 'file')),
    name                   text NOT NULL DEFAULT '',
    content                bytea NOT NULL,
    version                uuid NOT NULL,
    previous_version       uuid,
    creation_digest        bytea NOT NULL,
    last_digest            bytea NOT NULL,
    source_observation_id  uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    authored_by            uuid,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX artifacts_subject ON artifacts (project_id, data_subject_id);

-- Ids of deleted or erased artifacts; reuse is a conflict.
CREATE TABLE artifact_tombstones (
    project_id  bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    id          uuid NOT NULL,
    PRIMARY KEY (project_id, id)
);

CREATE TABLE subjects (
    id                  uuid PRIMARY KEY,
    project_id          bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    key_digest          bytea NOT NULL,
    external_reference  text,
    label               text NOT NULL DEFAULT '',
    version             uuid NOT NULL,
    previous_version    uuid,
    updated_by          uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, key_digest),
    UNIQUE (project_id, external_reference)
);

CREATE TABLE erasures (
    id               uuid PRIMARY KEY,
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id  text,
    reason           text,
    completed_at     timestamptz NOT NULL DEFAULT now(),
    deleted          jsonb NOT NULL,
    residual         jsonb NOT NULL
);
