-- delivery.sqlite, schema version 4 (the upgrade from version 3, run by
-- `metallo runtime install`; a fresh installation applies it too): when
-- the Runtime first took the pending command on (commit #1), RFC 3339 in
-- UTC, so that the command's bounded waits count from it after a restart
-- too (docs/site-runtime.md#command-bounds). Empty for a command saved
-- before this version kept it (its waits count from the recovery).
-- Existing rows keep their values and digests: the row digest covers
-- started_at only when it is not empty.
ALTER TABLE pending ADD COLUMN started_at TEXT NOT NULL DEFAULT '';
