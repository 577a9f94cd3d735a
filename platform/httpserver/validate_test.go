package httpserver_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/platform/httpserver"
)

type validatedLimits struct {
	Limits map[string]int64 `json:"limits"`
	Site   string           `json:"site" maxLength:"3"`
}

type validatedBody struct {
	Reports []validatedLimits `json:"reports"`
}

// A member name holding '.' (a limit key such as gpu.nvidia) is located
// exactly, and so is every failure after it: a bare huma.Validate locates
// the later ones under a shifted path.
func TestValidateBodyLocatesDottedNamesExactly(t *testing.T) {
	reg := huma.NewMapRegistry("#/components/schemas/", huma.DefaultSchemaNamer)
	schema := reg.Schema(reflect.TypeFor[validatedBody](), false, "")
	var data any
	raw := `{"reports":[{"limits":{"gpu.nvidia":"two","a.b[c":"x","memory":"lots"},"site":"toolong"},{"limits":{"cpu":"x"},"site":"ok","colour.x":1}]}`
	if err := json.Unmarshal([]byte(raw), &data); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range httpserver.ValidateBody(reg, schema, "body", data) {
		got = append(got, d.Location)
	}
	slices.Sort(got)
	want := []string{
		"body.reports[0].limits.a.b[c", "body.reports[0].limits.gpu.nvidia", "body.reports[0].limits.memory", "body.reports[0].site",
		"body.reports[1].colour.x", "body.reports[1].limits.cpu",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("locations\n got %q\nwant %q", got, want)
	}
	var again any
	_ = json.Unmarshal([]byte(raw), &again)
	if !reflect.DeepEqual(data, again) {
		t.Fatal("ValidateBody changed the value it validated")
	}
}
