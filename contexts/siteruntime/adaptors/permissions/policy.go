// Package permissions holds the Site Runtime's RuntimePermissions
// adaptors (docs/site-runtime.md#permission-providers): an HTTP
// client of the permission provider contract, and a policy file for
// standalone Sites and the demo. Composition chooses one explicitly
// (--permissions http:<url> or policy:<file>); there is no default.
package permissions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/contexts/siteruntime/domain"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Grant is one entry of a policy file: member may do actions in project.
type Grant struct {
	Member  string                    `json:"member"`
	Project string                    `json:"project"`
	Actions []domain.PermissionAction `json:"actions"`
}

// DefaultPolicyValidity is how long a policy-file answer may be used.
const DefaultPolicyValidity = 30 * time.Second

// Policy answers from a YAML file holding a list of grants:
//
//   - member: 9c2e4a61-0d7b-4f35-8e1a-6b3f2d9c4e80   # Party UUID
//     project: 0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9  # Project UUID
//     actions: [execution.start, execution.read, execution.cancel]
//
// The file is read on every check and parsed again whenever its bytes
// change, so a withdrawn grant takes effect at the next check. A file
// that cannot be read or parsed makes every check unavailable (wrapping
// application.ErrPermissionUnavailable) until it is fixed; stale grants
// are never used. The evidence ID names the file's content digest.
type Policy struct {
	path     string
	clock    application.Clock
	validFor time.Duration

	mu     sync.Mutex
	digest string
	grants []Grant
}

// NewPolicy loads path; it fails when the file cannot be read or parsed.
func NewPolicy(path string, clock application.Clock, validFor time.Duration) (*Policy, error) {
	if validFor <= 0 {
		validFor = DefaultPolicyValidity
	}
	p := &Policy{path: path, clock: clock, validFor: validFor}
	if _, _, err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// ParseGrants reads a policy file's content and validates every entry.
func ParseGrants(b []byte) ([]Grant, error) {
	var grants []Grant
	if err := yaml.UnmarshalStrict(b, &grants); err != nil {
		return nil, fmt.Errorf("want a YAML list of {member, project, actions}: %w", err)
	}
	known := []domain.PermissionAction{domain.ActionStart, domain.ActionRead, domain.ActionCancel}
	for i, g := range grants {
		switch {
		case !siteprotocol.IsUUID(g.Member):
			return nil, fmt.Errorf("entry %d: member must be a lower-case UUID", i)
		case !siteprotocol.IsUUID(g.Project):
			return nil, fmt.Errorf("entry %d: project must be a lower-case UUID", i)
		}
		for _, a := range g.Actions {
			if !slices.Contains(known, a) {
				return nil, fmt.Errorf("entry %d: unknown action %q (known: %v)", i, a, known)
			}
		}
	}
	return grants, nil
}

// load reads the file and parses it when its bytes changed.
func (p *Policy) load() ([]Grant, string, error) {
	b, err := os.ReadFile(p.path)
	if err != nil {
		return nil, "", fmt.Errorf("policy file: %w", err)
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	if digest == p.digest {
		return p.grants, digest, nil
	}
	grants, err := ParseGrants(b)
	if err != nil {
		return nil, "", fmt.Errorf("policy file %s: %w", p.path, err)
	}
	p.digest, p.grants = digest, grants
	return grants, digest, nil
}

// Check answers from the file's current grants.
func (p *Policy) Check(_ context.Context, q domain.PermissionQuery) (domain.Permission, error) {
	grants, digest, err := p.load()
	if err != nil {
		return domain.Permission{}, fmt.Errorf("%w: %v", application.ErrPermissionUnavailable, err)
	}
	out := domain.Permission{EvidenceID: "policy-sha256:" + digest[:16], ValidUntil: p.clock.Now().Add(p.validFor)}
	for _, g := range grants {
		if g.Member == q.MemberID && g.Project == q.ProjectID && slices.Contains(g.Actions, q.Action) {
			out.Allowed, out.Reason = true, "granted by "+p.path
			return out, nil
		}
	}
	out.Reason = fmt.Sprintf("%s grants no %s to this member in this Project", p.path, q.Action)
	return out, nil
}

var _ application.RuntimePermissions = (*Policy)(nil)
