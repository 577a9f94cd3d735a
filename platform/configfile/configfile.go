// Package configfile decodes the central roles' YAML configuration files
// (keys.yaml, environments.yaml) so that their validation can report every
// fault at once, each naming its entry (docs/architecture.md#configuration-files):
// an unknown field is one fault among the others, not a decoding error that
// hides them.
package configfile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Unknown is a field of the text that the file's shape does not have.
// Entry is the index of the entry of the file's top-level list holding it
// (-1 when the field is outside every entry); Field is its dotted path
// from that entry (or from the top of the file when Entry is -1). A name
// that differs from a known field only in case is unknown.
type Unknown struct {
	Entry int
	Field string
}

// Decode decodes the YAML text raw into v (a pointer to a struct whose JSON
// tags name the fields, as sigs.k8s.io/yaml reads them) and returns the
// fields of raw that v's shape does not have, in the text's order of
// entries. It returns an error, and nothing else, when raw is not YAML, a
// field is repeated, or a known field has a value of the wrong type.
func Decode(raw []byte, v any) ([]Unknown, error) {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(js, v); err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(js, &tree); err != nil {
		return nil, err
	}
	var out []Unknown
	walk(tree, reflect.TypeOf(v).Elem(), -1, "", true, &out)
	return out, nil
}

// walk records in out the members of val that t has no field for. top is
// true for the file's top-level object, whose list's elements are the
// entries.
func walk(val any, t reflect.Type, entry int, prefix string, top bool, out *[]Unknown) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		for _, name := range sortedKeys(obj) {
			ft, known := fields[name]
			if !known {
				*out = append(*out, Unknown{Entry: entry, Field: prefix + name})
				continue
			}
			if top && (ft.Kind() == reflect.Slice) {
				if list, ok := obj[name].([]any); ok {
					for i, el := range list {
						walk(el, ft.Elem(), i, "", false, out)
					}
				}
				continue
			}
			walk(obj[name], ft, entry, prefix+name+".", false, out)
		}
	case reflect.Slice:
		if list, ok := val.([]any); ok {
			for i, el := range list {
				walk(el, t.Elem(), entry, fmt.Sprintf("%s[%d].", strings.TrimSuffix(prefix, "."), i), false, out)
			}
		}
	}
}

// jsonFields maps each JSON name of t's exported fields to its type.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
