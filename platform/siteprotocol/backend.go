package siteprotocol

import (
	"regexp"
	"slices"
	"strconv"
)

// Backend is how an environment's Runtime runs work at its Site
// (kubernetes or slurm; environments.yaml names it per environment). The
// member's identity in bind-member follows it
// (docs/site-protocol.md#member-identity-by-backend).
type Backend string

// The backends.
const (
	// BackendKubernetes: the member acts as the ServiceAccount
	// member-<party> in the allocation's namespace, identified by its
	// Kubernetes UID.
	BackendKubernetes Backend = "kubernetes"
	// BackendSlurm: the member acts as its Unix account at the Site (the
	// Party's site username), identified by its decimal Unix uid, and its
	// jobs are charged to the allocation's Slurm account.
	BackendSlurm Backend = "slurm"
)

var (
	// posixUserRe is the lower-case POSIX user name a Slurm Site's member
	// account has: at most 32 characters (useradd(8)'s portable form).
	posixUserRe = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	// slurmAccountRe is a Slurm account (association) name as slurmdbd
	// stores it: lower case (sacctmgr folds names), letters, digits, '_',
	// '-' and '.', at most 64 characters.
	slurmAccountRe = regexp.MustCompile(`^[a-z0-9_][a-z0-9_.-]{0,63}$`)
	unixUIDRe      = regexp.MustCompile(`^[1-9][0-9]{0,9}$`)
)

// IsUnixUser reports whether s is a lower-case POSIX user name:
// [a-z_][a-z0-9_-]{0,31}.
func IsUnixUser(s string) bool { return posixUserRe.MatchString(s) }

// IsSlurmAccount reports whether s is a Slurm account (association) name
// the protocol accepts as a Slurm allocation's native scope.
func IsSlurmAccount(s string) bool { return slurmAccountRe.MatchString(s) }

// IsUnixUID reports whether s is a member's Unix uid in decimal: 1 to
// 4294967294 without leading zeros. 0 (root) and 4294967295 ((uid_t)-1)
// never name a member.
func IsUnixUID(s string) bool {
	if !unixUIDRe.MatchString(s) {
		return false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n <= 4294967294
}

// MemberAccountAt returns the native account a member acts as at an
// environment of backend: member-<party> on Kubernetes, the Party's site
// username (verbatim) on Slurm
// (docs/site-protocol.md#member-identity-by-backend).
func MemberAccountAt(b Backend, partyID, siteUsername string) string {
	if b == BackendSlurm {
		return siteUsername
	}
	return MemberAccount(partyID)
}

// Families returns the workload families an environment of backend b runs
// (docs/site-runtime.md#backends-and-families): kubernetes runs batch,
// application and inference; slurm runs batch only. An unknown backend
// runs none. Appending a workload command of another family to the stream
// of such an environment is refused 422 naming family (ValidateFor); a
// Runtime answers one stored before that rule unsupported-operation.
func (b Backend) Families() []Family {
	switch b {
	case BackendKubernetes:
		return []Family{FamilyBatch, FamilyApplication, FamilyInference}
	case BackendSlurm:
		return []Family{FamilyBatch}
	}
	return nil
}

// Runs reports whether an environment of backend b runs workloads of
// family f (one of b.Families()).
func (b Backend) Runs(f Family) bool { return slices.Contains(b.Families(), f) }
