-- Segments: finding a segment by its source turns (erasure), one segment per place and level.

CREATE INDEX segment_sources_observation ON segment_sources (observation_id);

-- At one level a subject's segments are disjoint, so a level and a first offset name one segment:
-- a second writer of the same segment conflicts instead of duplicating it.
CREATE UNIQUE INDEX segments_place ON segments (project_id, data_subject_id, level, from_offset)
    NULLS NOT DISTINCT;
