-- Whether a database carries skiplock's whole schema: read by a worker and the console at start and by
-- /healthz, so that a process on a database not (yet) migrated waits or says so instead of failing later.

-- name: migration_record_exists
-- True when the migration record (skiplock_migrations) exists: false on a database never migrated.
SELECT to_regclass('skiplock_migrations') IS NOT NULL

-- name: applied_versions
-- The versions of the numbered migrations applied to this database.
SELECT version FROM skiplock_migrations

-- name: try_migration_lock
-- Take the migrations' advisory lock if free: false while `skiplock migrate` runs somewhere.
SELECT pg_try_advisory_lock(%(key)s)

-- name: wait_migration_lock
-- Wait for the migrations' advisory lock: returns when the migration that holds it has ended.
SELECT pg_advisory_lock(%(key)s)

-- name: release_migration_lock
-- Release the migrations' advisory lock taken by this session.
SELECT pg_advisory_unlock(%(key)s)
