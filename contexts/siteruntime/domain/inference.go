package domain

import (
	"fmt"
	"slices"
	"strings"
)

// Inference argument prefix of the pinned ServingRuntimes
// (docs/site-runtime.md#the-private-inference-argument-rule).
const (
	// InferenceModelNameFlag precedes the InferenceService's name: the
	// runtime's --model_name={{.Name}}.
	InferenceModelNameFlag = "--model_name="
	// InferenceHuggingFaceBackend is the one optional argument between the
	// model name and the saved model arguments, of a model of format
	// InferenceFormatHuggingFace only.
	InferenceHuggingFaceBackend = "--backend=huggingface"
	// InferenceFormatHuggingFace is the model format whose runtimes may add
	// InferenceHuggingFaceBackend.
	InferenceFormatHuggingFace = "huggingface"
)

// CheckInferenceArgs applies the private inference argument rule
// (docs/site-runtime.md#the-private-inference-argument-rule): the args of a
// serving Pod's container for the InferenceService name, whose saved
// model is of format, must be exactly "--model_name=<name>", for format
// huggingface optionally "--backend=huggingface" (for any other format
// nothing), then the complete saved model arguments, unchanged and in
// order, and nothing after them. It returns nil when they are, and
// otherwise an error naming the first argument that breaks the rule (a
// changed name, a changed or added backend, a backend on another format,
// a changed, missing, extra or trailing argument).
func CheckInferenceArgs(args []string, name, format string, saved []string) error {
	if name == "" {
		return fmt.Errorf("no InferenceService name to check the arguments against")
	}
	if len(saved) == 0 {
		return fmt.Errorf("no saved model arguments to check the arguments against")
	}
	want := InferenceModelNameFlag + name
	if len(args) == 0 || args[0] != want {
		return fmt.Errorf("argument 0 is %s, not %q", quoteAt(args, 0), want)
	}
	rest := args[1:]
	if len(rest) > 0 && rest[0] != saved[0] && strings.HasPrefix(rest[0], "--backend") {
		if format != InferenceFormatHuggingFace {
			return fmt.Errorf("argument 1 is %q: the runtime of a model of format %q adds no backend", rest[0], format)
		}
		if rest[0] != InferenceHuggingFaceBackend {
			return fmt.Errorf("argument 1 is %q: the only backend the pinned runtime may add is %q", rest[0], InferenceHuggingFaceBackend)
		}
		rest = rest[1:]
	}
	offset := len(args) - len(rest)
	for i, s := range saved {
		if i >= len(rest) {
			return fmt.Errorf("argument %d is missing: the saved model argument %q", offset+i, s)
		}
		if rest[i] != s {
			return fmt.Errorf("argument %d is %q, not the saved model argument %q", offset+i, rest[i], s)
		}
	}
	if extra := rest[len(saved):]; len(extra) > 0 {
		return fmt.Errorf("argument %d (%q) follows the saved model arguments: nothing may", offset+len(saved), extra[0])
	}
	return nil
}

// InferenceArgs are the args the rule accepts without the optional
// backend: the prefix "--model_name=<name>" followed by saved.
func InferenceArgs(name string, saved []string) []string {
	return append([]string{InferenceModelNameFlag + name}, slices.Clone(saved)...)
}

func quoteAt(args []string, i int) string {
	if i >= len(args) {
		return "missing"
	}
	return fmt.Sprintf("%q", args[i])
}
