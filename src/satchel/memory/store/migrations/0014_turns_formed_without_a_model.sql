-- Observed turns formed with no extraction model (no facts were formed from them): recall says so
-- in `degraded`, with one probe of this index, which stays empty where a model forms every turn.
CREATE INDEX observations_formed_without_model ON observations (project_id, data_subject_id)
    WHERE kind = 'turn' AND formed_at IS NOT NULL AND extractor_model IS NULL;
