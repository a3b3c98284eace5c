-- The format of the core's statement files (worker/core/sql/__init__.py reads them). This file only
-- shows it; the core's statements live in files named after their table or concern.

-- name: server_time
-- The database's clock: what `now()` is for every statement of the same transaction.
SELECT now()
