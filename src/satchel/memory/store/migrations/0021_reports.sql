-- Theme reports: one per community of entities joined by current facts, with the facts, the
-- members and the source observations it drew on, and its vector under one embedder.

CREATE TABLE reports (
    id            uuid PRIMARY KEY,
    project_id    bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    community_id  text NOT NULL,
    level         integer NOT NULL,
    parent        text,
    title         text NOT NULL,
    summary       text NOT NULL,
    importance    double precision NOT NULL,
    written_by    text NOT NULL,
    embedder      text,
    embedding     vector(384),
    written_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, community_id)
);
CREATE INDEX reports_parent ON reports (project_id, parent);

-- No foreign keys to facts, entities or observations: the triggers below remove the report
-- itself when what it drew on changes, instead of a cascade cutting one link and leaving it.
CREATE TABLE report_facts (
    report_id  uuid NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
    fact_id    uuid NOT NULL,
    version    uuid NOT NULL,
    PRIMARY KEY (fact_id, report_id)
);
CREATE TABLE report_members (
    report_id  uuid NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
    entity_id  uuid NOT NULL,
    PRIMARY KEY (entity_id, report_id)
);
CREATE TABLE report_sources (
    report_id       uuid NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
    observation_id  uuid NOT NULL,
    PRIMARY KEY (observation_id, report_id)
);
CREATE INDEX report_facts_report ON report_facts (report_id);
CREATE INDEX report_members_report ON report_members (report_id);
CREATE INDEX report_sources_report ON report_sources (report_id);

-- A fact a report drew on that changes (a new version: superseded, retracted, corrected, ended)
-- or goes (erased, its entity deleted) removes the report at once; so does a new current fact
-- naming a member. The worker's next pass writes the community's report again.
CREATE FUNCTION remove_reports_of_fact() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.known_until IS NULL THEN
            DELETE FROM reports WHERE id IN (SELECT m.report_id FROM report_members m
                WHERE m.entity_id IN (NEW.subject_entity_id, NEW.object_entity_id));
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.version IS NOT DISTINCT FROM OLD.version
        AND NEW.known_until IS NOT DISTINCT FROM OLD.known_until
        AND NEW.retracted_at IS NOT DISTINCT FROM OLD.retracted_at
        AND NEW.superseded_by IS NOT DISTINCT FROM OLD.superseded_by
        AND NEW.valid_until IS NOT DISTINCT FROM OLD.valid_until
        AND NEW.statement IS NOT DISTINCT FROM OLD.statement
        AND NEW.object_entity_id IS NOT DISTINCT FROM OLD.object_entity_id THEN
        RETURN NULL;
    END IF;
    DELETE FROM reports WHERE id IN (SELECT r.report_id FROM report_facts r
        WHERE r.fact_id = OLD.id);
    RETURN NULL;
END $$;

CREATE TRIGGER facts_remove_reports AFTER INSERT OR UPDATE OR DELETE ON facts
    FOR EACH ROW EXECUTE FUNCTION remove_reports_of_fact();
