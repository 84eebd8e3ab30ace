-- Passages: every message searchable by full text (generated tsvector, GIN) and by meaning
-- (a 384-float embedding, HNSW over cosine distance), with the embedding generation of each project.
ALTER TABLE messages
    ADD COLUMN search_text tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    ADD COLUMN embedding vector(384),
    ADD COLUMN indexed_at timestamptz;
CREATE INDEX messages_search ON messages USING gin (search_text);
CREATE INDEX messages_embedding ON messages USING hnsw (embedding vector_cosine_ops);
CREATE INDEX messages_unindexed ON messages (project_id) WHERE embedding IS NULL;

-- One generation per project and embedder: a new embedder starts a new generation and the
-- project's embeddings are built again.
CREATE TABLE passage_generations (
    project_id   bigint PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    id           uuid NOT NULL,
    embedder     text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now()
);
