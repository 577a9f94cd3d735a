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
		err := CheckInferenceArgs(v.Args, c.Name, InferenceFormatHuggingFace, c.Saved)
		if v.Accepted && err != nil {
			t.Errorf("%s: refused: %v", v.Case, err)
		}
		if !v.Accepted && err == nil {
			t.Errorf("%s: accepted %q", v.Case, v.Args)
		}
	}
	if got := InferenceArgs(c.Name, c.Saved); !slices.Equal(got, c.Variants[0].Args) || CheckInferenceArgs(got, c.Name, InferenceFormatHuggingFace, c.Saved) != nil {
		t.Errorf("InferenceArgs = %q", got)
	}
	if CheckInferenceArgs(InferenceArgs(c.Name, c.Saved), "", InferenceFormatHuggingFace, c.Saved) == nil || CheckInferenceArgs(InferenceArgs(c.Name, nil), c.Name, InferenceFormatHuggingFace, nil) == nil {
		t.Error("a check without a name or saved arguments passed")
	}
}

// A model of another format than huggingface (the local cluster's
// sklearn runtime, docs/site-runtime.md#the-private-inference-argument-rule)
// has exactly "--model_name=<name>" and the saved arguments: no backend,
// not even the huggingface one.
func TestTheInferenceArgumentRuleOfAnotherFormatAllowsNoBackend(t *testing.T) {
	name, saved := "attempt-0a1b", []string{"--model_dir=/workspace/models/iris"}
	for _, c := range []struct {
		args     []string
		accepted bool
	}{
		{[]string{"--model_name=attempt-0a1b", "--model_dir=/workspace/models/iris"}, true},
		{[]string{"--model_name=attempt-0a1b", "--backend=huggingface", "--model_dir=/workspace/models/iris"}, false},
		{[]string{"--model_name=attempt-0a1b", "--backend=sklearn", "--model_dir=/workspace/models/iris"}, false},
		{[]string{"--model_name=attempt-0a1b"}, false},
		{[]string{"--model_name=attempt-0a1b", "--model_dir=/workspace/models/iris", "--model_dir=/workspace"}, false},
		{[]string{"--model_name=attempt-0a1c", "--model_dir=/workspace/models/iris"}, false},
	} {
		err := CheckInferenceArgs(c.args, name, "sklearn", saved)
		if c.accepted != (err == nil) {
			t.Errorf("%q: accepted %v, want %v (%v)", c.args, err == nil, c.accepted, err)
		}
	}
}
