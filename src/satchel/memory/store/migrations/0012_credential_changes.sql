-- Every change to a token, and to a project's name or suspension, tells the services listening
-- on `satchel_credentials` when it commits, so they can forget the grants they remember (see
-- `api/credentials.py`). Creating a token needs no word: a grant never looked up is not kept.
CREATE FUNCTION credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('satchel_credentials', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER tokens_changed AFTER UPDATE OR DELETE OR TRUNCATE ON tokens
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_changed();

CREATE TRIGGER projects_changed AFTER UPDATE OF name, suspended_at OR DELETE OR TRUNCATE
    ON projects FOR EACH STATEMENT EXECUTE FUNCTION credentials_changed();
