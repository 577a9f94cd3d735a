package domain

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// Limit keys in canonical units (docs/resource-provisioning.md#units-and-limit-keys:
// CPU millicores, memory and storage bytes, accelerators gpu.<vendor> in
// devices).
const (
	// LimitCPU is CPU in millicores (1 core = 1000).
	LimitCPU = "cpu"
	// LimitMemory is memory in bytes.
	LimitMemory = "memory"
	// LimitStorage is persistent storage in bytes.
	LimitStorage = "storage"
	// LimitGPUPrefix starts an accelerator key, "gpu.<vendor>", in devices
	// (e.g. "gpu.nvidia").
	LimitGPUPrefix = "gpu."
)

// gpuKey is "gpu.<vendor>" with a lower-case vendor of letters, digits and
// inner hyphens, as a Kubernetes label segment would be.
var gpuKey = regexp.MustCompile(`^gpu\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Limits maps a limit key to an amount in the key's canonical unit
// (millicores, bytes or devices). A nil Limits means "absent" (applied limits
// not confirmed yet); an empty non-nil Limits means "present, no keys".
type Limits map[string]int64

// ValidLimitKey reports whether key is one of cpu, memory, storage or
// gpu.<vendor>.
func ValidLimitKey(key string) bool {
	switch key {
	case LimitCPU, LimitMemory, LimitStorage:
		return true
	}
	return gpuKey.MatchString(key)
}

// Validate returns one Problem per unknown key or negative amount, located
// under loc (e.g. "body.reports[0].limits"), in key order. Amounts are
// whole numbers in canonical units, so non-canonical units (cores, GiB) cannot
// be expressed; an unknown key such as "ram" or "cpu_cores" is refused by
// name.
func (l Limits) Validate(loc string) []Problem {
	var out []Problem
	for _, k := range l.Keys() {
		switch {
		case !ValidLimitKey(k):
			out = append(out, Problem{Location: loc + "." + k, Message: fmt.Sprintf("unknown limit key %q: want cpu (millicores), memory (bytes), storage (bytes) or gpu.<vendor> (devices)", k), Value: k})
		case l[k] < 0:
			out = append(out, Problem{Location: loc + "." + k, Message: fmt.Sprintf("limit %q must not be negative", k), Value: l[k]})
		}
	}
	return out
}

// Keys returns the keys in ascending order.
func (l Limits) Keys() []string {
	return slices.Sorted(maps.Keys(l))
}

// Clone returns a copy; nil stays nil.
func (l Limits) Clone() Limits {
	if l == nil {
		return nil
	}
	return maps.Clone(l)
}

// Equal reports whether l and o hold the same keys and amounts, treating
// absent (nil) and present-but-empty as different.
func (l Limits) Equal(o Limits) bool {
	if (l == nil) != (o == nil) {
		return false
	}
	return maps.Equal(l, o)
}

// MissingFrom returns the keys of l that applied does not hold (a configured
// key without an applied value), in key order.
func (l Limits) MissingFrom(applied Limits) []string {
	var out []string
	for _, k := range l.Keys() {
		if _, ok := applied[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
