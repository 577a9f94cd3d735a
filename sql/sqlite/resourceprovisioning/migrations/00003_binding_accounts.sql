-- Each member binding's native account, held on the binding because it
-- follows the environment's backend: member-<party> at a Kubernetes
-- environment, the Party's site username at a Slurm one. Every binding
-- before this migration is a Kubernetes one. The index serves the one
-- Party per account rule (docs/resource-provisioning.md#one-party-per-account).

-- +goose Up
ALTER TABLE member_bindings ADD COLUMN account text NOT NULL DEFAULT '';
UPDATE member_bindings SET account = 'member-' || party_id;
CREATE INDEX member_bindings_by_account ON member_bindings (environment, account);

-- +goose Down
DROP INDEX member_bindings_by_account;
ALTER TABLE member_bindings DROP COLUMN account;
