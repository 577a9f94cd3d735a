// Package waldur maps Waldur marketplace resource records (a Kubernetes
// namespace offering, as Waldur's API returns them) to Resource Provisioning
// reports, as a Site's agent does (docs/resource-provisioning.md#the-waldur-mapping):
//
//   - uuid → provider_resource_id; offering_uuid, project_uuid, state and
//     paused as they are;
//   - limits → configured limits in the units the Waldur Kubernetes namespace
//     plugin enforces: cpu cores × 1000 (millicores); ram and storage GiB →
//     bytes (the plugin writes them to the quota as Gi); gpu → gpu.<vendor>
//     devices, the vendor from configuration;
//   - backend_metadata.quota (Kubernetes quantities) → applied limits
//     (cpu → millicores; memory, storage → bytes; gpu → gpu.<vendor>); absent
//     quota → no applied limits;
//   - backend_metadata.name → native_scope;
//   - observed_at: when the record was read.
//
// Unknown limit or quota keys, limits that are not numbers, and amounts that
// are not whole numbers in canonical units within int64 (a quota such as
// "1e18" cpu or "100Ei" memory is refused, never wrapped, clamped or
// zeroed) are errors naming the record and key: nothing is guessed.
package waldur

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
)

// DefaultGPUVendor is the accelerator vendor used when none is configured.
const DefaultGPUVendor = "nvidia"

// gib is one GiB in bytes.
const gib = 1 << 30

// Resource is the part of a Waldur marketplace resource record the mapping
// reads; other fields of the record are ignored.
type Resource struct {
	UUID            string                     `json:"uuid"`
	Name            string                     `json:"name"`
	OfferingUUID    string                     `json:"offering_uuid"`
	ProjectUUID     string                     `json:"project_uuid"`
	State           string                     `json:"state"`
	Paused          bool                       `json:"paused"`
	Limits          map[string]json.RawMessage `json:"limits"`
	BackendMetadata *BackendMetadata           `json:"backend_metadata"`
}

// BackendMetadata is what the namespace plugin reports back.
type BackendMetadata struct {
	// Name is the namespace.
	Name string `json:"name"`
	// Quota is the enforced ResourceQuota, as Kubernetes quantities
	// (strings such as "32", "128Gi", "500m"); nil when not reported.
	Quota map[string]json.RawMessage `json:"quota"`
}

// Options configure the mapping.
type Options struct {
	// GPUVendor names the accelerator vendor of "gpu" (DefaultGPUVendor
	// when empty).
	GPUVendor string
	// ObservedAt is when the records were read.
	ObservedAt time.Time
}

// ParseResources decodes one record or an array of records.
func ParseResources(data []byte) ([]Resource, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, errors.New("no Waldur resource record")
	}
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		return d.Decode(v)
	}
	if data[0] == '[' {
		var rs []Resource
		if err := dec(&rs); err != nil {
			return nil, fmt.Errorf("decode Waldur resource records: %w", err)
		}
		return rs, nil
	}
	var r Resource
	if err := dec(&r); err != nil {
		return nil, fmt.Errorf("decode Waldur resource record: %w", err)
	}
	return []Resource{r}, nil
}

// Report maps one record. Errors name the record (uuid, name) and the key;
// a record without uuid, offering_uuid, project_uuid or state is an error
// naming every missing field (a report without them would be refused, and
// an empty one must never be posted), and so is a report the server would
// refuse by domain.Report.Validate (e.g. an unknown state, opts.ObservedAt
// zero or finer than a microsecond).
func Report(r Resource, opts Options) (domain.Report, error) {
	what := fmt.Sprintf("resource %s (%s)", r.UUID, r.Name)
	var missing []string
	for _, f := range []struct{ name, v string }{{"uuid", r.UUID}, {"offering_uuid", r.OfferingUUID}, {"project_uuid", r.ProjectUUID}, {"state", r.State}} {
		if strings.TrimSpace(f.v) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return domain.Report{}, fmt.Errorf("%s: missing %s", what, strings.Join(missing, ", "))
	}
	gpuKey, err := GPUKey(opts.GPUVendor)
	if err != nil {
		return domain.Report{}, err
	}
	rep := domain.Report{
		ProviderResourceID: r.UUID, OfferingID: r.OfferingUUID, ProviderProjectID: r.ProjectUUID,
		State: r.State, Paused: r.Paused, ObservedAt: opts.ObservedAt.UTC(), Limits: domain.Limits{},
	}
	for key, raw := range r.Limits {
		canon, factor := "", int64(1)
		switch key {
		case "cpu":
			canon, factor = domain.LimitCPU, 1000
		case "ram":
			canon, factor = domain.LimitMemory, gib
		case "storage":
			canon, factor = domain.LimitStorage, gib
		case "gpu":
			canon = gpuKey
		default:
			return domain.Report{}, fmt.Errorf("%s: unknown limit %q: want cpu (cores), ram (GiB), storage (GiB) or gpu (devices)", what, key)
		}
		v, err := scale(raw, factor)
		if err != nil {
			return domain.Report{}, fmt.Errorf("%s: limit %q: %w", what, key, err)
		}
		rep.Limits[canon] = v
	}
	if md := r.BackendMetadata; md != nil {
		rep.NativeScope = md.Name
		if md.Quota != nil {
			applied, err := quota(md.Quota, gpuKey)
			if err != nil {
				return domain.Report{}, fmt.Errorf("%s: backend_metadata.quota: %w", what, err)
			}
			rep.AppliedLimits = applied
		}
	}
	// The server's own rules, checked before anything is posted (a bad
	// state, an over-long ID, a control character, an observed_at finer
	// than a microsecond); only the clock skew needs the server's clock.
	if ps := rep.Validate("report"); len(ps) > 0 {
		parts := make([]string, 0, len(ps))
		for _, p := range ps {
			parts = append(parts, p.Location+": "+p.Message)
		}
		return domain.Report{}, fmt.Errorf("%s: would be refused: %s", what, strings.Join(parts, "; "))
	}
	return rep, nil
}

// GPUKey returns the limit key of Waldur's gpu limit for vendor
// ("gpu.<vendor>"; DefaultGPUVendor when vendor is empty), or an error when
// that is not a valid limit key (domain.ValidLimitKey).
func GPUKey(vendor string) (string, error) {
	if vendor == "" {
		vendor = DefaultGPUVendor
	}
	key := domain.LimitGPUPrefix + vendor
	if !domain.ValidLimitKey(key) {
		return "", fmt.Errorf("GPU vendor %q does not make a valid limit key %q", vendor, key)
	}
	return key, nil
}

// maxNamed bounds how many failing records Reports names in its error.
const maxNamed = 5

// Reports maps every record. When any fails, nothing is returned and the
// error names how many records failed and the first maxNamed of them, each
// by its place (1-based) among rs, its uuid and name, and what is wrong.
func Reports(rs []Resource, opts Options) ([]domain.Report, error) {
	if _, err := GPUKey(opts.GPUVendor); err != nil {
		return nil, err
	}
	out := make([]domain.Report, 0, len(rs))
	var failed []string
	n := 0
	for i, r := range rs {
		rep, err := Report(r, opts)
		if err != nil {
			n++
			if len(failed) < maxNamed {
				failed = append(failed, fmt.Sprintf("record %d of %d: %v", i+1, len(rs), err))
			}
			continue
		}
		out = append(out, rep)
	}
	switch {
	case n == 0:
		return out, nil
	case n == 1:
		return nil, errors.New(failed[0])
	case n > len(failed):
		return nil, fmt.Errorf("%d of %d records cannot be reported (the first %d named): %s", n, len(rs), len(failed), strings.Join(failed, "; "))
	default:
		return nil, fmt.Errorf("%d of %d records cannot be reported: %s", n, len(rs), strings.Join(failed, "; "))
	}
}

// scale returns the decimal raw (a JSON number, or a string holding one)
// × factor, which must be a whole, non-negative number that fits int64.
func scale(raw json.RawMessage, factor int64) (int64, error) {
	text := strings.TrimSpace(string(raw))
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text = s
	}
	var n json.Number
	if err := json.Unmarshal([]byte(strconv.Quote(text)), &n); err != nil || text == "" {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	v, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	v.Mul(v, new(big.Rat).SetInt64(factor))
	if v.Sign() < 0 {
		return 0, fmt.Errorf("%s must not be negative", n)
	}
	if !v.IsInt() || !v.Num().IsInt64() {
		return 0, fmt.Errorf("%s is not a whole number of canonical units", n)
	}
	return v.Num().Int64(), nil
}

// quota maps a ResourceQuota read back to applied limits.
func quota(q map[string]json.RawMessage, gpuKey string) (domain.Limits, error) {
	out := domain.Limits{}
	for key, raw := range q {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			s = strings.TrimSpace(string(raw)) // a bare JSON number
		}
		qty, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not a Kubernetes quantity: %w", key, s, err)
		}
		if qty.Sign() < 0 {
			return nil, fmt.Errorf("%q: %s must not be negative", key, s)
		}
		switch key {
		case "cpu":
			// MilliValue rounds up and wraps or clamps beyond int64; the
			// quantity compares exactly with its millicores only when
			// they are whole and fit.
			m := qty.MilliValue()
			if m < 0 || resource.NewMilliQuantity(m, qty.Format).Cmp(qty) != 0 {
				return nil, fmt.Errorf("%q: %s is not a whole number of millicores that fits 64 bits", key, s)
			}
			out[domain.LimitCPU] = m
		case "memory", "storage", "gpu":
			// Value rounds up and wraps or clamps beyond int64 (and AsInt64
			// refuses exact values held as decimals), so the same exact
			// comparison. ParseQuantity itself clamps a binary-suffixed
			// amount beyond int64 ("100Ei") to math.MaxInt64, so that value
			// is refused too: it cannot be told from a clamped one.
			v := qty.Value()
			if v == math.MaxInt64 || resource.NewQuantity(v, qty.Format).Cmp(qty) != 0 {
				unit := "bytes"
				if key == "gpu" {
					unit = "devices"
				}
				return nil, fmt.Errorf("%q: %s is not a whole number of %s that fits 64 bits", key, s, unit)
			}
			canon := map[string]string{"memory": domain.LimitMemory, "storage": domain.LimitStorage, "gpu": gpuKey}[key]
			out[canon] = v
		default:
			return nil, fmt.Errorf("unknown quota %q: want cpu, memory, storage or gpu", key)
		}
	}
	return out, nil
}
