-- Passage indexes that never rewrite a message.
--
-- A message says whether it belongs to an observed turn (curated statements do not), so a search
-- of turns needs no join.
ALTER TABLE messages ADD COLUMN turn boolean NOT NULL DEFAULT true;
UPDATE messages m SET turn = false FROM observations o
WHERE o.id = m.observation_id AND o.kind <> 'turn';
-- Full text in two indexes, turns and the rest, for the same reason as the vectors below: a
-- search of turns never reads the curated statements that hold the same words.
DROP INDEX messages_search;
CREATE INDEX messages_search_turns ON messages USING gin (search_text) WHERE turn;
CREATE INDEX messages_search_other ON messages USING gin (search_text) WHERE NOT turn;
--
-- Vectors move to a table of their own (with the message's scope columns, which never change, so
-- a filtered nearest-neighbour scan needs no join), which leaves the messages heap narrow for the
-- scans of full-text search. The worker builds vectors and lexeme counts in log order; a
-- project's progress is two offsets, everything at or below them is done.
CREATE TABLE message_vectors (
    message_id       uuid PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    project_id       bigint NOT NULL,
    data_subject_id  text,
    role             text NOT NULL,
    turn             boolean NOT NULL,
    embedding        vector(384) NOT NULL
);
INSERT INTO message_vectors (message_id, project_id, data_subject_id, role, turn, embedding)
SELECT m.id, m.project_id, m.data_subject_id, m.role, m.turn, m.embedding
FROM messages m WHERE m.embedding IS NOT NULL;
-- Two graphs, turns and the rest (curated statements): a search of turns alone, as recall's, never
-- walks past the statements nearest a question about a person.
CREATE INDEX message_vectors_turns ON message_vectors USING hnsw (embedding vector_cosine_ops)
    WHERE turn;
CREATE INDEX message_vectors_other ON message_vectors USING hnsw (embedding vector_cosine_ops)
    WHERE NOT turn;
CREATE INDEX message_vectors_project ON message_vectors (project_id);

CREATE TABLE passage_progress (
    project_id       bigint PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    vectors_through  bigint NOT NULL DEFAULT -1,  -- every message at or below has its vector
    terms_through    bigint NOT NULL DEFAULT -1   -- every message at or below is counted
);
INSERT INTO passage_progress (project_id, vectors_through)
SELECT p.id, coalesce((SELECT min(o.log_offset) - 1 FROM messages m
    JOIN observations o ON o.id = m.observation_id
    WHERE m.project_id = p.id AND m.embedding IS NULL), p.stored)
FROM projects p JOIN passage_generations g ON g.project_id = p.id WHERE p.stored IS NOT NULL;

DROP INDEX messages_embedding;
DROP INDEX messages_unindexed;
ALTER TABLE messages DROP COLUMN embedding, DROP COLUMN indexed_at;

-- How many counted messages hold each lexeme, per data subject (so an erasure can count one
-- subject again) and per project (so a project-wide search reads a few rows). The lexeme ''
-- counts the messages themselves.
CREATE TABLE subject_terms (
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    data_subject_id  text NOT NULL,              -- '' for messages without a subject
    role             text NOT NULL,
    turn             boolean NOT NULL,           -- the message belongs to an observed turn
    lexeme           text NOT NULL,
    messages         integer NOT NULL,
    PRIMARY KEY (project_id, data_subject_id, lexeme, role, turn)
);
CREATE TABLE project_terms (
    project_id       bigint NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    role             text NOT NULL,
    turn             boolean NOT NULL,
    lexeme           text NOT NULL,
    messages         integer NOT NULL,
    PRIMARY KEY (project_id, lexeme, role, turn)
);
