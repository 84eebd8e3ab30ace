-- Entities: a spelling key for similar-name anchoring, and paging by id.

-- A normalized name's spelling key. Each word keeps its first letter; the rest of the word keeps
-- only its consonants, as their sound group (B: b f p v, C: c g j k q s x z, D: d t, L: l,
-- M: m n, R: r; vowels, h, w and y are dropped), with runs of one group collapsed. So "jon",
-- "john" and "joan" share "jM", and "stephen" and "steven" share "sDBM". Uppercase letters never
-- occur in a normalized name, so a group cannot be mistaken for a letter. The key only proposes
-- candidates; recall scores each by its spelling and keeps the close ones.
CREATE FUNCTION entity_name_key(normalized text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
SELECT string_agg(
    left(word, 1) || regexp_replace(
        translate(substr(word, 2), 'bfpvcgjkqsxzdtlmnraeiouyhw', 'BBBBCCCCCCCCDDLMMR'),
        '(.)\1+', '\1', 'g'),
    ' ' ORDER BY place)
FROM unnest(string_to_array(normalized, ' ')) WITH ORDINALITY AS words(word, place)
$$;

-- Kept with the row by PostgreSQL itself: every way an entity is created or deleted (formation,
-- authored records, erasure, purge) keeps the key current with no code of its own.
CREATE INDEX entities_spelling ON entities (project_id, entity_name_key(normalized));
CREATE INDEX entities_page ON entities (project_id, id);
