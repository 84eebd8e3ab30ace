-- Recall's probe for turns formed with no extraction model reads the first of them in this
-- index's order and stops: a statement ordered by every column of the index and cut at one row has
-- no cheaper plan than the index, whatever the statistics say. The index of 0014 ended at the
-- person, which a probe for one person fixes, leaving nothing to order by.
DROP INDEX observations_formed_without_model;
CREATE INDEX observations_formed_without_model ON observations (project_id, data_subject_id, log_offset)
    WHERE kind = 'turn' AND formed_at IS NOT NULL AND extractor_model IS NULL;
