-- delivery.sqlite, schema version 3 (the upgrade from version 2, run by
-- `metallo runtime install`; a fresh installation applies it too): the
-- Kubernetes UID of the member's service account a bind-member carried
-- (docs/site-protocol.md#the-accounts-uid-in-a-binding). Empty for a
-- binding applied without one (checked by name only). Existing rows keep
-- their values and digests: the row digest covers account_uid only when
-- it is not empty.
ALTER TABLE member_bindings ADD COLUMN account_uid TEXT NOT NULL DEFAULT '';
