-- Every journal file: its name, fixed schema version and the installation
-- that created it. One row. A file of another version is refused, never
-- converted in place.
CREATE TABLE journal_meta (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    file            TEXT    NOT NULL,
    schema_version  INTEGER NOT NULL,
    installation_id TEXT    NOT NULL,
    digest          TEXT    NOT NULL
);
