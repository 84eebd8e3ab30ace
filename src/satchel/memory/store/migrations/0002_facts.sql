-- Facts: the closed predicate vocabulary, entity identity and sources, retractions, lookups.

-- The admitted predicates; a "one" predicate keeps a single current fact per subject and person.
CREATE TABLE predicates (
    name         text PRIMARY KEY,
    cardinality  text NOT NULL CHECK (cardinality IN ('one', 'many'))
);
INSERT INTO predicates (name, cardinality) VALUES
    ('has_name', 'one'), ('has_role', 'one'), ('works_at', 'many'), ('member_of', 'many'),
    ('lives_in', 'one'), ('born_in', 'one'), ('speaks', 'many'), ('has_contact', 'many'),
    ('has_timezone', 'one'), ('prefers', 'many'), ('dislikes', 'many'),
    ('interested_in', 'many'), ('knows_about', 'many'), ('uses', 'many'), ('learning', 'many'),
    ('intends_to', 'many'), ('committed_to', 'many'), ('responsible_for', 'many'),
    ('blocked_by', 'many'), ('knows', 'many'), ('works_with', 'many'), ('manages', 'many'),
    ('related_to', 'many'), ('owns', 'many'), ('has_access_to', 'many'), ('part_of', 'many'),
    ('instance_of', 'one'), ('located_in', 'one'), ('depends_on', 'many'), ('same_as', 'many'),
    ('created', 'many'), ('contributed_to', 'many'), ('participated_in', 'many'),
    ('occurred_on', 'one'), ('scheduled_for', 'one'), ('due_on', 'one'), ('has_status', 'one'),
    ('requires', 'many'), ('prohibits', 'many');

-- One entity per normalized name, per project and person (NULL = project-wide).
CREATE UNIQUE INDEX entities_identity ON entities (project_id, data_subject_id, normalized)
    NULLS NOT DISTINCT;

-- Every observation an entity was named in; an entity left with no source is an orphan.
CREATE TABLE entity_sources (
    entity_id       uuid NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    observation_id  uuid NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    PRIMARY KEY (entity_id, observation_id)
);
CREATE INDEX entity_sources_observation ON entity_sources (observation_id);

-- Who authored a curated claim, and which extractor produced a piece of evidence.
ALTER TABLE fact_evidence
    ADD COLUMN authored_by uuid,
    ADD COLUMN extractor_version text;
CREATE INDEX fact_evidence_observation ON fact_evidence (observation_id);

-- The retraction of a fact (at most one: a retracted fact stays closed).
CREATE TABLE fact_retractions (
    operation_id                       uuid PRIMARY KEY,
    fact_id                            uuid NOT NULL UNIQUE REFERENCES facts(id) ON DELETE CASCADE,
    version                            uuid NOT NULL,
    principal_id                       uuid,
    retracted_at                       timestamptz NOT NULL,
    replacement_source_observation_id  uuid,
    replacement_record_id              uuid
);

CREATE INDEX fact_history_fact ON fact_history (fact_id, known_until DESC, id DESC);
-- Every fact naming an entity, closed ones too (reads of the past, entity deletion, erasure).
CREATE INDEX facts_subject_entity ON facts (subject_entity_id);
CREATE INDEX facts_object_entity ON facts (object_entity_id);
CREATE INDEX facts_page ON facts (project_id, id);
CREATE INDEX facts_subject_page ON facts (project_id, data_subject_id, id);
