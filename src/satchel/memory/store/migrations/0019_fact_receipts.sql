-- Formation receipts: what one formation of one source admitted, kept so lost facts can be put
-- back without a model. A receipt belongs to its source: it goes when the source goes (erasure
-- and retention count it first).

-- One row per formation of a source. `facts` holds each admitted fact as it was written (ids,
-- entities, statement, validity, evidence), in admission order; `withdrawn` the ids of those
-- later retracted or corrected, or withdrawn with their entity, which recovery never restores.
CREATE TABLE fact_receipts (
    id                uuid PRIMARY KEY,
    project_id        bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id   text,
    observation_id    uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    formed_at         timestamptz NOT NULL,
    extractor_model   text,
    extractor_prompt  text,
    extractor_code    text,
    facts             jsonb NOT NULL,
    withdrawn         uuid[] NOT NULL DEFAULT '{}'
);
-- A source's receipts, newest first (recovery reads the newest); a project's in formation order.
CREATE INDEX fact_receipts_observation ON fact_receipts (observation_id, formed_at DESC);
CREATE INDEX fact_receipts_project ON fact_receipts (project_id, formed_at, id);
CREATE INDEX fact_receipts_subject ON fact_receipts (project_id, data_subject_id);
