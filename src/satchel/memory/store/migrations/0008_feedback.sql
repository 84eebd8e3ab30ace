-- Feedback: reports that a record looks wrong, kept beside the facts until someone promotes them.

-- A report belongs to the record it is about: it goes when the record goes (erasure counts it
-- first). It is written once; promotion only fills the promoted_* columns, once.
CREATE TABLE feedback (
    id                     uuid PRIMARY KEY,
    project_id             bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    fact_id                uuid NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    note                   text NOT NULL,
    proposed_object        text,
    recorded_by            uuid NOT NULL,
    recorded_at            timestamptz NOT NULL,
    promoted_by            uuid,
    promoted_at            timestamptz,
    replacement_record_id  uuid REFERENCES facts(id) ON DELETE SET NULL,
    CHECK ((promoted_by IS NULL) = (promoted_at IS NULL))
);

-- Each page reads one of these in page order (recorded_at DESC, id DESC) and never sorts: the
-- open queue, one record's reports (fact ids are unique, so the record leads; deleting a fact
-- finds its reports here too), and every report of the project.
CREATE INDEX feedback_open ON feedback (project_id, recorded_at DESC, id DESC)
    WHERE promoted_at IS NULL;
CREATE INDEX feedback_record ON feedback (fact_id, recorded_at DESC, id DESC);
CREATE INDEX feedback_page ON feedback (project_id, recorded_at DESC, id DESC);
-- A replacement erased by source leaves its promoted report in place, pointing at nothing.
CREATE INDEX feedback_replacement ON feedback (replacement_record_id)
    WHERE replacement_record_id IS NOT NULL;
