-- Formation: the extractor that formed each turn, and the claims it refused with their reasons.

ALTER TABLE observations
    ADD COLUMN extractor_model text,
    ADD COLUMN extractor_prompt text,
    ADD COLUMN extractor_code text;

-- Parked turns, counted by freshness.
CREATE INDEX observations_parked ON observations (project_id) WHERE parked_at IS NOT NULL;

CREATE TABLE rejected_claims (
    id               uuid PRIMARY KEY,
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id  text,
    observation_id   uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    reason           text NOT NULL,
    claim            jsonb NOT NULL,
    extractor_model  text,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rejected_claims_observation ON rejected_claims (observation_id);
CREATE INDEX rejected_claims_subject ON rejected_claims (project_id, data_subject_id);
