-- A project's turn revision: counted up whenever its formed watermark is recomputed, which every
-- change to its turns' state does (a turn formed, parked or unparked, a turn or subject erased,
-- a record or artifact written). With `stored` and `formed` it tells the worker whether anything
-- could call for new segments since its last pass over the project.
ALTER TABLE projects ADD COLUMN turn_revision bigint NOT NULL DEFAULT 0;
