package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The KServe v1 inference protocol of one model, spoken when the service's arguments begin with
// --model_name=NAME: how the private inference argument rule renders a serving Pod's arguments
// (--model_name=<InferenceService name>, optionally --backend=huggingface, then the saved model
// arguments; docs/site-runtime.md#the-private-inference-argument-rule), so the local cluster's
// ClusterServingRuntime metallo-httpservice can run it as KServe's kserve-container
// (deploy/localcluster/README.md, "KServe").
const (
	modelNameFlag      = "--model_name="
	huggingFaceBackend = "--backend=huggingface"
	// predictVerb ends a v1 predict path: /v1/models/NAME:predict.
	predictVerb = ":predict"
	// maxPredictBody bounds a predict request's body.
	maxPredictBody = 4 << 20
)

// inferenceModel is the one model the service serves: its name and the model arguments after
// the runtime's prefix (reported at start, otherwise unused).
type inferenceModel struct {
	name string
	args []string
}

// modelOf reads the service's arguments: nil (no model, the plain HTTP service) unless the
// first is --model_name=NAME; then NAME, an optional --backend=huggingface and the model
// arguments after it. An empty NAME is an error.
func modelOf(args []string) (*inferenceModel, error) {
	if len(args) == 0 || !strings.HasPrefix(args[0], modelNameFlag) {
		return nil, nil
	}
	m := &inferenceModel{name: strings.TrimPrefix(args[0], modelNameFlag)}
	if m.name == "" {
		return nil, errors.New("--model_name= names no model")
	}
	rest := args[1:]
	if len(rest) > 0 && rest[0] == huggingFaceBackend {
		rest = rest[1:]
	}
	m.args = append([]string{}, rest...)
	return m, nil
}

// routes adds the v1 protocol's model routes to mux: GET /v1/models/NAME answers the model
// ready, POST /v1/models/NAME:predict echoes the request's instances as its predictions. Another
// model is 404, a body that is not a JSON object with an array "instances" 400; errors are JSON
// objects {"error": "..."}.
func (m *inferenceModel) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"models": []string{m.name}})
	})
	mux.HandleFunc("GET /v1/models/{model}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("model")
		if name != m.name {
			writeError(w, http.StatusNotFound, "model %s is not served here (this service serves %s)", name, m.name)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": m.name, "ready": true})
	})
	mux.HandleFunc("POST /v1/models/{model}", func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutSuffix(r.PathValue("model"), predictVerb)
		if !ok {
			writeError(w, http.StatusNotFound, "no such verb in %s: the v1 protocol's is %s", r.URL.Path, predictVerb)
			return
		}
		if name != m.name {
			writeError(w, http.StatusNotFound, "model %s is not served here (this service serves %s)", name, m.name)
			return
		}
		instances, err := readInstances(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"predictions": instances})
	})
}

// readInstances reads a v1 predict request, {"instances": [...]}, and returns its instances as
// they were sent.
func readInstances(body io.Reader) ([]json.RawMessage, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxPredictBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the request body: %w", err)
	}
	if len(b) > maxPredictBody {
		return nil, fmt.Errorf("the request body exceeds %d bytes", maxPredictBody)
	}
	var req struct {
		Instances *[]json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("the request body is not a v1 predict request {\"instances\": [...]}: %w", err)
	}
	if req.Instances == nil {
		return nil, errors.New("the request body has no \"instances\" array")
	}
	return *req.Instances, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}
