// Package waldur maps Waldur marketplace resource records (a Kubernetes
// namespace offering, as Waldur's API returns them) to Resource Provisioning
// reports, as a Site's agent does (design resource-provisioning.md, "The
// Waldur mapping"):
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
// Unknown limit or quota keys and amounts that are not whole numbers in
// canonical units are errors naming the record and key: nothing is guessed.
package waldur

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
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
	UUID            string                 `json:"uuid"`
	Name            string                 `json:"name"`
	OfferingUUID    string                 `json:"offering_uuid"`
	ProjectUUID     string                 `json:"project_uuid"`
	State           string                 `json:"state"`
	Paused          bool                   `json:"paused"`
	Limits          map[string]json.Number `json:"limits"`
	BackendMetadata *BackendMetadata       `json:"backend_metadata"`
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
	vendor := opts.GPUVendor
	if vendor == "" {
		vendor = DefaultGPUVendor
	}
	gpuKey := domain.LimitGPUPrefix + vendor
	if !domain.ValidLimitKey(gpuKey) {
		return domain.Report{}, fmt.Errorf("GPU vendor %q does not make a valid limit key %q", vendor, gpuKey)
	}
	rep := domain.Report{
		ProviderResourceID: r.UUID, OfferingID: r.OfferingUUID, ProviderProjectID: r.ProjectUUID,
		State: r.State, Paused: r.Paused, ObservedAt: opts.ObservedAt.UTC(), Limits: domain.Limits{},
	}
	for key, n := range r.Limits {
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
		v, err := scale(n, factor)
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

// Reports maps every record, failing on the first error, which names the
// record's place (1-based) among rs.
func Reports(rs []Resource, opts Options) ([]domain.Report, error) {
	out := make([]domain.Report, 0, len(rs))
	for i, r := range rs {
		rep, err := Report(r, opts)
		if err != nil {
			return nil, fmt.Errorf("record %d of %d: %w", i+1, len(rs), err)
		}
		out = append(out, rep)
	}
	return out, nil
}

// scale returns the decimal n × factor, which must be a whole, non-negative
// number.
func scale(n json.Number, factor int64) (int64, error) {
	v, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return 0, fmt.Errorf("%q is not a number", n)
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
			out[domain.LimitCPU] = qty.MilliValue()
		case "memory":
			out[domain.LimitMemory] = qty.Value()
		case "storage":
			out[domain.LimitStorage] = qty.Value()
		case "gpu":
			out[gpuKey] = qty.Value()
		default:
			return nil, fmt.Errorf("unknown quota %q: want cpu, memory, storage or gpu", key)
		}
	}
	return out, nil
}
