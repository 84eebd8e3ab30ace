-- Vectors in one partition a project, so each project has HNSW graphs of its own.
--
-- A graph shared by projects is walked past every other project's vectors: a search keeps only
-- the rows of its own project after walking, so beside a project ten times its size it reads ten
-- rows for each one it keeps (9,598 for 200 in one measured search), and a small project's search
-- can run out of rows to walk before it has found its own. A project's partition is made when the
-- project is (a trigger on `projects`, whichever way the row is written); every index of the
-- parent is made on it, empty, at once.
DROP INDEX message_vectors_turns_user, message_vectors_turns_assistant,
    message_vectors_turns_system, message_vectors_turns_tool, message_vectors_other_user,
    message_vectors_other_assistant, message_vectors_other_system, message_vectors_other_tool,
    message_vectors_project;
ALTER TABLE message_vectors RENAME TO message_vectors_shared;
ALTER INDEX message_vectors_pkey RENAME TO message_vectors_shared_pkey;

CREATE TABLE message_vectors (
    message_id       uuid NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    project_id       bigint NOT NULL,
    data_subject_id  text,
    role             text NOT NULL,
    turn             boolean NOT NULL,
    embedding        vector(384) NOT NULL,
    PRIMARY KEY (message_id, project_id)  -- message first: a message's delete cascades by id
) PARTITION BY LIST (project_id);

-- Made apart and attached: `CREATE TABLE ... PARTITION OF` would wait for every search under
-- way and hold every new one back meanwhile; attaching takes a lock that searches and vector
-- writes do not conflict with (cloning the foreign key still waits for writes to `messages`
-- under way, a few milliseconds).
CREATE FUNCTION add_vector_partition(project bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    part text := 'message_vectors_' || project;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN  -- a project id written again (a restore)
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE message_vectors INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
        part);
    EXECUTE format('ALTER TABLE message_vectors ATTACH PARTITION %I FOR VALUES IN (%s)',
        part, project);
END
$$;

CREATE FUNCTION project_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM add_vector_partition(NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER project_vectors AFTER INSERT ON projects
    FOR EACH ROW EXECUTE FUNCTION project_added();

SELECT add_vector_partition(id) FROM projects;
INSERT INTO message_vectors SELECT message_id, project_id, data_subject_id, role, turn, embedding
FROM message_vectors_shared;
DROP TABLE message_vectors_shared;

-- The graphs of migration 0011, now one set a project.
CREATE INDEX message_vectors_turns_user ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE turn AND role = 'user';
CREATE INDEX message_vectors_turns_assistant ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE turn AND role = 'assistant';
CREATE INDEX message_vectors_turns_system ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE turn AND role = 'system';
CREATE INDEX message_vectors_turns_tool ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE turn AND role = 'tool';
CREATE INDEX message_vectors_other_user ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE NOT turn AND role = 'user';
CREATE INDEX message_vectors_other_assistant ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE NOT turn AND role = 'assistant';
CREATE INDEX message_vectors_other_system ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE NOT turn AND role = 'system';
CREATE INDEX message_vectors_other_tool ON message_vectors
    USING hnsw (embedding vector_cosine_ops) WHERE NOT turn AND role = 'tool';
