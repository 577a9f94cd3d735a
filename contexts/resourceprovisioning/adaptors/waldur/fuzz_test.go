package waldur_test

import (
	"os"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/adaptors/waldur"
	"github.com/pharos-metallo/metallo/platform/fuzzlane"
)

// FuzzMapping: ParseResources and Reports never panic on any file, and a
// report the mapping returns is one the server accepts by the domain's
// rules (domain.Report.Validate): the mapping never posts a report the
// server would refuse, nor one it would accept with wrapped or clamped
// amounts (docs/resource-provisioning.md#the-waldur-mapping).
func FuzzMapping(f *testing.F) {
	fuzzlane.Mark(f)
	raw, err := os.ReadFile("testdata/waldur-resources.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw, "nvidia")
	f.Add([]byte(`{"uuid":"u","offering_uuid":"o","project_uuid":"p","state":"OK","limits":{"cpu":1e18,"ram":1.5},"backend_metadata":{"name":"ns","quota":{"cpu":"100Ei","memory":"1.5Gi","nvidia.com/gpu":"2"}}}`), "amd")
	f.Add([]byte(`[{"uuid":"u"}]`), "")
	f.Add([]byte(`{"uuid":"u","offering_uuid":"o","project_uuid":"p","state":"Terminated","paused":true,"limits":{"gpu":-1}}`), "Bad Vendor")
	f.Fuzz(func(t *testing.T, data []byte, vendor string) {
		rs, err := waldur.ParseResources(data)
		if err != nil {
			return
		}
		reports, err := waldur.Reports(rs, waldur.Options{GPUVendor: vendor, ObservedAt: readAt})
		if err != nil {
			return
		}
		for i, r := range reports {
			if problems := r.Validate("report"); len(problems) > 0 {
				t.Fatalf("record %d of %q mapped to a report the server refuses: %+v (%+v)", i, data, problems, r)
			}
			for k, v := range r.Limits {
				if v < 0 {
					t.Fatalf("record %d: limit %s = %d", i, k, v)
				}
			}
		}
	})
}
