-- One HNSW graph per kind (turns, the rest) and role, in place of one per kind. A walk filters
-- the rows it meets by the scope after walking; a role filtered that way could swallow a whole
-- search: an assistant that answers alike a thousand times leaves a thousand equal vectors,
-- which HNSW links only to each other, and a search for users' words that walked into them
-- found nothing else. A search now walks the graph of each role it asks for.
DROP INDEX message_vectors_turns, message_vectors_other;
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
