-- The inconsistencies read (docs/resource-provisioning.md#the-inconsistencies-read).

-- name: InconsistentAllocationsAfter :many
-- Allocations neither retired nor suspended whose applied limits differ
-- from the configured ones, that lack an applied value for a configured key
-- (reason limits_not_applied), or that were last seen before stale_before;
-- keyset-paged by ID.
SELECT * FROM allocations
WHERE id > sqlc.arg(after) AND lifecycle NOT IN ('retired', 'suspended')
  AND ((applied_limits IS NOT NULL AND applied_limits <> configured_limits)
       OR reasons @> '["limits_not_applied"]'::jsonb
       OR last_seen_at < sqlc.arg(stale_before))
ORDER BY id LIMIT sqlc.arg(max_rows);

-- name: AmbiguousResources :many
-- Every non-retired allocation of a canonical Project that has another
-- non-retired allocation at the same Site, by Project, Site and ID.
SELECT a.project_id, a.site, a.id FROM allocations a
WHERE a.project_id <> '' AND a.lifecycle <> 'retired' AND EXISTS (
    SELECT 1 FROM allocations o
    WHERE o.project_id = a.project_id AND o.site = a.site AND o.id <> a.id AND o.lifecycle <> 'retired'
)
ORDER BY a.project_id, a.site, a.id;
