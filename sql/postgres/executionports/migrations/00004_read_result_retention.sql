-- Where read results live (docs/execution-ports.md#read-results-retention):
-- each command keeps its operation (read from its canonical form, so the
-- results of read-logs, read-file and proxy can be found), and a read's
-- result content is dropped after the retention while its digest stays
-- (result_expired_at says when). Down is refused while any result has
-- expired (the old CHECK fails): its content cannot come back.
-- +goose Up
ALTER TABLE commands ADD COLUMN operation text;
UPDATE commands SET operation = COALESCE(convert_from(canonical, 'UTF8')::jsonb ->> 'operation', '');
ALTER TABLE commands ALTER COLUMN operation SET NOT NULL;
ALTER TABLE commands ADD COLUMN result_expired_at timestamptz;
ALTER TABLE commands DROP CONSTRAINT commands_check;
ALTER TABLE commands ADD CONSTRAINT commands_result_check CHECK (
    (result_digest IS NULL) = (acknowledged_at IS NULL)
    AND (result IS NULL) = (result_digest IS NULL OR result_expired_at IS NOT NULL)
    AND (result_expired_at IS NULL OR result_digest IS NOT NULL)
);
-- The sweep's scan: results still held, by operation and age.
CREATE INDEX commands_held_results ON commands (operation, acknowledged_at) WHERE result IS NOT NULL;

-- +goose Down
DROP INDEX commands_held_results;
ALTER TABLE commands DROP CONSTRAINT commands_result_check;
ALTER TABLE commands ADD CONSTRAINT commands_check
    CHECK ((result IS NULL) = (result_digest IS NULL) AND (result IS NULL) = (acknowledged_at IS NULL));
ALTER TABLE commands DROP COLUMN result_expired_at;
ALTER TABLE commands DROP COLUMN operation;
