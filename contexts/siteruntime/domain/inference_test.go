package domain

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// TestTheInferenceArgumentRuleAcceptsOnlyTheExactPrefixAndTheSavedArgs runs
// every variant of the inference arguments case (testdata/inference-args.json,
// from the runtime cases' README): only "--model_name=<name>", optionally
// "--backend=huggingface", then the complete unchanged saved arguments is
// accepted.
func TestTheInferenceArgumentRuleAcceptsOnlyTheExactPrefixAndTheSavedArgs(t *testing.T) {
	raw, err := os.ReadFile("testdata/inference-args.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Name     string   `json:"name"`
		Saved    []string `json:"saved"`
		Variants []struct {
			Case     string   `json:"case"`
			Accepted bool     `json:"accepted"`
			Args     []string `json:"args"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Variants) < 10 {
		t.Fatalf("only %d variants read", len(c.Variants))
	}
	for _, v := range c.Variants {
		err := CheckInferenceArgs(v.Args, c.Name, c.Saved)
		if v.Accepted && err != nil {
			t.Errorf("%s: refused: %v", v.Case, err)
		}
		if !v.Accepted && err == nil {
			t.Errorf("%s: accepted %q", v.Case, v.Args)
		}
	}
	if got := InferenceArgs(c.Name, c.Saved); !slices.Equal(got, c.Variants[0].Args) || CheckInferenceArgs(got, c.Name, c.Saved) != nil {
		t.Errorf("InferenceArgs = %q", got)
	}
	if CheckInferenceArgs(InferenceArgs(c.Name, c.Saved), "", c.Saved) == nil || CheckInferenceArgs(InferenceArgs(c.Name, nil), c.Name, nil) == nil {
		t.Error("a check without a name or saved arguments passed")
	}
}
