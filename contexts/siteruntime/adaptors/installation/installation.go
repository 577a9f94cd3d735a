// Package installation holds the InstallationRecord adaptors: the record,
// kept outside the journals' volume, that this installation initialised the
// journal set (docs/site-runtime.md#installation). In a cluster it is a ConfigMap
// in the Runtime's namespace (ConfigMap); standalone Sites and tests use a
// file (File). An existing record is never replaced.
package installation

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pharos-metallo/metallo/platform/siteprotocol"
)

// Kind is where the record lives.
type Kind string

// Kinds.
const (
	KindConfigMap Kind = "configmap"
	KindFile      Kind = "file"
)

// Location is a parsed --installation-record value.
type Location struct {
	Kind Kind
	// Namespace and Name locate a ConfigMap.
	Namespace, Name string
	// Path locates a file.
	Path string
}

// ParseLocation reads "configmap:<namespace>/<name>" or "file:<path>".
func ParseLocation(spec string) (Location, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	switch {
	case !ok || rest == "":
	case Kind(kind) == KindFile:
		return Location{Kind: KindFile, Path: rest}, nil
	case Kind(kind) == KindConfigMap:
		ns, name, ok := strings.Cut(rest, "/")
		if !ok || !siteprotocol.IsDNSLabel(ns) || !validName(name) {
			return Location{}, errors.New("want configmap:<namespace>/<name> with a namespace label and a ConfigMap name")
		}
		return Location{Kind: KindConfigMap, Namespace: ns, Name: name}, nil
	}
	return Location{}, fmt.Errorf("want configmap:<namespace>/<name> or file:<path>")
}

// validName accepts a DNS-1123 subdomain (ConfigMap names).
func validName(n string) bool {
	if n == "" || len(n) > 253 {
		return false
	}
	for _, part := range strings.Split(n, ".") {
		if !siteprotocol.IsDNSLabel(part) {
			return false
		}
	}
	return true
}

// String formats l as it is configured.
func (l Location) String() string {
	if l.Kind == KindFile {
		return "file:" + l.Path
	}
	return "configmap:" + l.Namespace + "/" + l.Name
}
