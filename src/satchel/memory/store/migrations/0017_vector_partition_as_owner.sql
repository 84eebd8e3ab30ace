-- A project's vector partition is made with the rights of the function's owner, the role that
-- owns the schema: the service's login role may insert a project (the trigger then makes its
-- partition) without any right to create or alter tables itself. Its search path is pinned to
-- the schema of `message_vectors` (then pg_temp, last), so no caller's path can choose what the
-- function's statements name.
ALTER FUNCTION add_vector_partition(bigint) SECURITY DEFINER;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION add_vector_partition(bigint) SET search_path = %I, pg_temp',
        (SELECT nspname FROM pg_namespace
         WHERE oid = (SELECT relnamespace FROM pg_class WHERE oid = 'message_vectors'::regclass)));
END
$$;
