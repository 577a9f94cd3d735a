package siteprotocol

// RuntimeVersionHeader carries the Runtime's build version (what `metallo
// version` prints first) on its pulls; the execution role records the
// last one per environment (docs/site-protocol.md#the-runtimes-version).
// It is optional: a pull without it is served the same.
const RuntimeVersionHeader = "Metallo-Runtime-Version"

// MaxRuntimeVersionBytes bounds a RuntimeVersionHeader value.
const MaxRuntimeVersionBytes = 128

// RuntimeVersionPattern is the rule of a RuntimeVersionHeader value beside
// its length (1..MaxRuntimeVersionBytes): visible ASCII only, '!' to '~'
// (no space, no control character, nothing beyond ASCII). The server
// refuses a pull whose value breaks the rule (422 validation-failed naming
// the header) and changes nothing.
const RuntimeVersionPattern = `^[!-~]+$`

// ValidRuntimeVersion reports whether v is a RuntimeVersionHeader value
// the server accepts: 1..MaxRuntimeVersionBytes bytes, each '!' to '~'.
func ValidRuntimeVersion(v string) bool {
	if v == "" || len(v) > MaxRuntimeVersionBytes {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '!' || v[i] > '~' {
			return false
		}
	}
	return true
}

// RuntimeVersionValue returns version as a RuntimeVersionHeader value the
// server accepts, for the sending side: every byte outside '!' to '~'
// becomes '_', the value is cut to MaxRuntimeVersionBytes, and an empty
// version is "unknown". A version a release or `make build` stamps (a tag,
// a pseudo-version, `git describe` output) passes unchanged.
func RuntimeVersionValue(version string) string {
	if version == "" {
		return "unknown"
	}
	b := []byte(version)
	if len(b) > MaxRuntimeVersionBytes {
		b = b[:MaxRuntimeVersionBytes]
	}
	for i, c := range b {
		if c < '!' || c > '~' {
			b[i] = '_'
		}
	}
	return string(b)
}
