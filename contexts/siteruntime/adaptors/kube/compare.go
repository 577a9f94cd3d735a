package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/application"
	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Mismatch compares a live object (as the API server returns it, decoded
// JSON) with the specification the Runtime rendered and saved (spec), and
// names the first rendered field the live object lacks or holds
// differently ("" when none). Rules (docs/site-runtime.md#the-spec-comparison):
// every field the Runtime rendered must be present and equal —
// lists element by element and of the same length, so an added container,
// env entry or volume is a mismatch; resource quantities compare by value;
// fields the Runtime did not set (nulls and empty objects in the rendered
// JSON, and everything absent from it: server and controller defaults,
// status, uid) are ignored; the one rendered field whose absence is
// accepted is a readiness probe's initialDelaySeconds: 0 (omittedDefault).
// The live object's spec-digest annotation — a Deployment's also on its
// Pod template — must equal the SHA-256 of spec.
//
// On a Pod, the tolerations the DefaultTolerationSeconds admission plugin
// appends are not compared (withoutDefaultTolerations).
//
// One alternative is accepted for a workspace helper Pod: a live helper
// created with the earlier 30-second grace period whose digest is that of
// LegacyHelperSpec(spec) is compared with that specification, so every
// other field still has to match (docs/site-runtime.md#the-workspace-helper).
func Mismatch(spec []byte, live map[string]any) (string, error) {
	if kind, _ := live["kind"].(string); kind == "Pod" {
		if legacy, ok := LegacyHelperSpec(spec); ok && annotation(live, AnnotationSpecDigest) == siteprotocol.Digest(legacy) {
			spec = legacy
		}
	}
	var rendered map[string]any
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	if err := dec.Decode(&rendered); err != nil {
		return "", fmt.Errorf("decode the saved specification: %w", err)
	}
	delete(rendered, "status")
	if got := annotation(live, AnnotationSpecDigest); got != siteprotocol.Digest(spec) {
		return fmt.Sprintf("metadata.annotations[%s]: live %q, saved specification %s", AnnotationSpecDigest, got, siteprotocol.Digest(spec)), nil
	}
	if kind, _ := live["kind"].(string); kind == "Deployment" {
		// Create stamps the digest on the Pod template too (stampSpecDigest).
		tmpl, _ := live["spec"].(map[string]any)
		tmpl, _ = tmpl["template"].(map[string]any)
		if got := annotation(tmpl, AnnotationSpecDigest); got != siteprotocol.Digest(spec) {
			return fmt.Sprintf("spec.template.metadata.annotations[%s]: live %q, saved specification %s", AnnotationSpecDigest, got, siteprotocol.Digest(spec)), nil
		}
	}
	live = normalise(live)
	if kind, _ := live["kind"].(string); kind == "Pod" {
		live = withoutDefaultTolerations(rendered, live)
	}
	return subset("", rendered, live), nil
}

// defaultTolerationKeys are the taints the API server's
// DefaultTolerationSeconds admission plugin adds a toleration for to
// every Pod that has none of its own: {key, operator Exists, effect
// NoExecute, tolerationSeconds 300 by default}.
var defaultTolerationKeys = []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}

// withoutDefaultTolerations is a copy of a live Pod without the
// tolerations the DefaultTolerationSeconds admission plugin appended (of
// its keys, operator Exists, effect NoExecute, with tolerationSeconds)
// when the rendered Pod tolerates no taint of that key: a Pod the Runtime
// renders with tolerations (the Site's --pod-tolerations) holds them live
// with those two after them (docs/site-runtime.md#the-spec-comparison).
func withoutDefaultTolerations(rendered, live map[string]any) map[string]any {
	spec, _ := live["spec"].(map[string]any)
	got, _ := spec["tolerations"].([]any)
	if len(got) == 0 {
		return live
	}
	renderedSpec, _ := rendered["spec"].(map[string]any)
	want, _ := renderedSpec["tolerations"].([]any)
	renderedKey := func(key string) bool {
		for _, t := range want {
			if m, _ := t.(map[string]any); m["key"] == key {
				return true
			}
		}
		return false
	}
	var kept []any
	for _, t := range got {
		m, _ := t.(map[string]any)
		key, _ := m["key"].(string)
		_, seconds := m["tolerationSeconds"]
		if slices.Contains(defaultTolerationKeys, key) && m["operator"] == "Exists" && m["effect"] == "NoExecute" && seconds && !renderedKey(key) {
			continue
		}
		kept = append(kept, t)
	}
	out := maps.Clone(live)
	spec = maps.Clone(spec)
	spec["tolerations"] = kept
	out["spec"] = spec
	return out
}

func annotation(obj map[string]any, key string) string {
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	s, _ := ann[key].(string)
	return s
}

// normalise re-encodes v so that numbers are json.Number, as in the
// rendered specification.
func normalise(v map[string]any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if dec.Decode(&out) != nil {
		return v
	}
	return out
}

// unset reports whether a rendered value sets nothing.
func unset(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range x {
			if !unset(e) {
				return false
			}
		}
		return true
	}
	return false
}

func subset(path string, rendered, live any) string {
	if unset(rendered) {
		return ""
	}
	switch want := rendered.(type) {
	case map[string]any:
		got, ok := live.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: live %s, rendered an object", orRoot(path), describe(live))
		}
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if unset(want[k]) {
				continue
			}
			gv, present := got[k]
			if !present && omittedDefault(path, k, want[k]) {
				continue
			}
			if !present {
				return fmt.Sprintf("%s: absent from the live object", join(path, k))
			}
			if m := subset(join(path, k), want[k], gv); m != "" {
				return m
			}
		}
		return ""
	case []any:
		got, ok := live.([]any)
		if !ok || len(got) != len(want) {
			return fmt.Sprintf("%s: live %s, rendered %s", orRoot(path), describe(live), describe(rendered))
		}
		for i := range want {
			if m := subset(fmt.Sprintf("%s[%d]", path, i), want[i], got[i]); m != "" {
				return m
			}
		}
		return ""
	}
	if reflect.DeepEqual(rendered, live) || sameQuantity(path, rendered, live) {
		return ""
	}
	return fmt.Sprintf("%s: live %s, rendered %s", orRoot(path), describe(live), describe(rendered))
}

// omittedDefault reports the one rendered field whose absence from the
// live object is no mismatch, the omitted-default exception
// (docs/site-runtime.md#the-spec-comparison): a readiness probe's
// initialDelaySeconds of exactly 0, which the API server omits. Any other
// value, and any other missing field, is still a mismatch.
func omittedDefault(path, key string, rendered any) bool {
	if key != "initialDelaySeconds" || (path != "readinessProbe" && !strings.HasSuffix(path, ".readinessProbe")) {
		return false
	}
	n, ok := rendered.(json.Number)
	return ok && n.String() == "0"
}

// sameQuantity compares resource quantities (under requests, limits or
// hard) by value: the API server may spell a quantity differently.
func sameQuantity(path string, a, b any) bool {
	if !strings.Contains(path, ".requests.") && !strings.Contains(path, ".limits.") {
		return false
	}
	as, aok := a.(string)
	bs, bok := b.(string)
	if !aok || !bok {
		return false
	}
	qa, err1 := resource.ParseQuantity(as)
	qb, err2 := resource.ParseQuantity(bs)
	return err1 == nil && err2 == nil && qa.Cmp(qb) == 0
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(object)"
	}
	return path
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// LegacyHelperSpec is a helper Pod's saved specification as the earlier
// rendering had it: terminationGracePeriodSeconds 30 instead of 5, every
// other byte the same. ok is false when spec is no helper rendering of
// this version (docs/site-runtime.md#the-workspace-helper).
func LegacyHelperSpec(spec []byte) ([]byte, bool) {
	now := []byte(fmt.Sprintf(`"terminationGracePeriodSeconds":%d,`, application.HelperGracePeriodSeconds))
	if bytes.Count(spec, now) != 1 || !bytes.Contains(spec, []byte(`"kind":"Pod"`)) {
		return nil, false
	}
	return bytes.Replace(spec, now, []byte(fmt.Sprintf(`"terminationGracePeriodSeconds":%d,`, application.LegacyHelperGracePeriodSeconds)), 1), true
}
