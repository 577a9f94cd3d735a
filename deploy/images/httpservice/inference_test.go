package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// The arguments as the private inference argument rule renders them make the service speak the
// v1 protocol of the named model; any other arguments leave it the plain HTTP service.
func TestModelOfReadsTheInferenceArguments(t *testing.T) {
	cases := []struct {
		args []string
		want *inferenceModel
	}{
		{nil, nil},
		{[]string{"--port=8080"}, nil},
		{[]string{"x", "--model_name=late"}, nil},
		{[]string{"--model_name=attempt-1"}, &inferenceModel{name: "attempt-1", args: []string{}}},
		{[]string{"--model_name=attempt-1", "--model_id=demo"}, &inferenceModel{name: "attempt-1", args: []string{"--model_id=demo"}}},
		{[]string{"--model_name=attempt-1", "--backend=huggingface", "--model_id=demo", "--dtype=float32"},
			&inferenceModel{name: "attempt-1", args: []string{"--model_id=demo", "--dtype=float32"}}},
	}
	for _, c := range cases {
		got, err := modelOf(c.args)
		if err != nil {
			t.Fatalf("modelOf(%q): %v", c.args, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("modelOf(%q) = %+v, want %+v", c.args, got, c.want)
		}
	}
	if _, err := modelOf([]string{"--model_name="}); err == nil {
		t.Error("an empty model name was accepted")
	}
}

// do sends one request to h and returns the status, the Content-Type and the body decoded as
// JSON (nil when it is not JSON).
func do(t *testing.T, h http.Handler, method, path, body string) (int, string, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, rd))
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		v = nil
	}
	return rec.Code, rec.Header().Get("Content-Type"), v
}

// With --model_name=NAME the service answers the v1 protocol: NAME is ready, a predict request's
// instances come back as its predictions, another model is 404, a malformed request 400, both
// with a JSON error.
func TestTheV1ProtocolOfTheNamedModel(t *testing.T) {
	model, err := modelOf([]string{"--model_name=attempt-7", "--backend=huggingface", "--model_id=demo"})
	if err != nil {
		t.Fatal(err)
	}
	h := handler("pod-1", model)

	code, ctype, v := do(t, h, http.MethodGet, "/v1/models/attempt-7", "")
	if code != http.StatusOK || ctype != "application/json" || !reflect.DeepEqual(v, map[string]any{"name": "attempt-7", "ready": true}) {
		t.Errorf("GET /v1/models/attempt-7: %d %s %v", code, ctype, v)
	}
	code, _, v = do(t, h, http.MethodGet, "/v1/models", "")
	if code != http.StatusOK || !reflect.DeepEqual(v, map[string]any{"models": []any{"attempt-7"}}) {
		t.Errorf("GET /v1/models: %d %v", code, v)
	}
	code, ctype, v = do(t, h, http.MethodPost, "/v1/models/attempt-7:predict", `{"instances": [[1, 2.5], {"text": "hello"}, "x", null]}`)
	want := map[string]any{"predictions": []any{[]any{1.0, 2.5}, map[string]any{"text": "hello"}, "x", nil}}
	if code != http.StatusOK || ctype != "application/json" || !reflect.DeepEqual(v, want) {
		t.Errorf("predict: %d %s %v, want 200 %v", code, ctype, v, want)
	}
	code, _, v = do(t, h, http.MethodPost, "/v1/models/attempt-7:predict", `{"instances": []}`)
	if code != http.StatusOK || !reflect.DeepEqual(v, map[string]any{"predictions": []any{}}) {
		t.Errorf("predict of no instances: %d %v", code, v)
	}

	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{http.MethodGet, "/v1/models/attempt-8", "", http.StatusNotFound},
		{http.MethodPost, "/v1/models/attempt-8:predict", `{"instances": [1]}`, http.StatusNotFound},
		{http.MethodPost, "/v1/models/attempt-7:explain", `{"instances": [1]}`, http.StatusNotFound},
		{http.MethodPost, "/v1/models/attempt-7", `{"instances": [1]}`, http.StatusNotFound},
		{http.MethodPost, "/v1/models/attempt-7:predict", `{"instances": [1`, http.StatusBadRequest},
		{http.MethodPost, "/v1/models/attempt-7:predict", `not json`, http.StatusBadRequest},
		{http.MethodPost, "/v1/models/attempt-7:predict", ``, http.StatusBadRequest},
		{http.MethodPost, "/v1/models/attempt-7:predict", `{"inputs": [1]}`, http.StatusBadRequest},
		{http.MethodPost, "/v1/models/attempt-7:predict", `{"instances": null}`, http.StatusBadRequest},
		{http.MethodPost, "/v1/models/attempt-7:predict", `{"instances": {"a": 1}}`, http.StatusBadRequest},
		{http.MethodPost, "/v1/models/attempt-7:predict", `[1, 2]`, http.StatusBadRequest},
	} {
		code, ctype, v := do(t, h, c.method, c.path, c.body)
		if code != c.code || ctype != "application/json" || v["error"] == nil || v["error"] == "" {
			t.Errorf("%s %s %q: %d %s %v, want %d with a JSON error", c.method, c.path, c.body, code, ctype, v, c.code)
		}
	}

	// What it answered before stays: the probe path, the echo and the catch-all.
	if code, _, _ := do(t, h, http.MethodGet, "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz: %d", code)
	}
	if code, _, v := do(t, h, http.MethodGet, "/anything", ""); code != http.StatusOK || v["service"] != "metallo-httpservice" || v["host"] != "pod-1" {
		t.Errorf("GET /anything: %d %v", code, v)
	}
}

// Without a model the v1 paths are the catch-all's, as before.
func TestWithoutAModelTheV1PathsAreThePlainService(t *testing.T) {
	h := handler("pod-1", nil)
	code, _, v := do(t, h, http.MethodGet, "/v1/models/attempt-7", "")
	if code != http.StatusOK || v["service"] != "metallo-httpservice" || v["path"] != "/v1/models/attempt-7" {
		t.Errorf("GET /v1/models/attempt-7 without a model: %d %v", code, v)
	}
	code, _, v = do(t, h, http.MethodPost, "/v1/models/attempt-7:predict", `{"instances": [1]}`)
	if code != http.StatusOK || v["method"] != http.MethodPost || v["predictions"] != nil {
		t.Errorf("predict without a model: %d %v", code, v)
	}
}
