-- name: GetMeta :one
SELECT file, schema_version, installation_id, digest FROM journal_meta WHERE id = 1;

-- name: InsertMeta :exec
INSERT INTO journal_meta (id, file, schema_version, installation_id, digest) VALUES (1, ?, ?, ?, ?);
