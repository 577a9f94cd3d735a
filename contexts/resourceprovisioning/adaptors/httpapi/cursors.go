package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/application"
	"github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// Cursor prefixes inside the opaque base64url tokens.
const (
	snapshotCursorPrefix = "a1:"
	feedCursorPrefix     = application.FeedCursorPrefix
)

func encodeCursor(prefix, v string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(prefix + v))
}

// decodeCursor returns the value inside token (a cursor with prefix), ""
// for an empty token, or a 400 invalid-cursor problem at location when the
// token is not one this API could have issued: not base64url, another
// prefix, an empty value, or a value that is not valid(v) (its form:
// an allocation ID, a feed position). Nothing of a forged cursor reaches
// the store.
func decodeCursor(prefix, token, location string, valid func(v string) bool) (string, error) {
	if token == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if v, ok := strings.CutPrefix(string(raw), prefix); err == nil && ok && v != "" && valid(v) {
		return v, nil
	}
	return "", httpserver.NewProblem(http.StatusBadRequest, ReasonInvalidCursor, "the cursor was not issued by this API",
		&huma.ErrorDetail{Location: location, Message: "not a cursor of this API", Value: token})
}

// isAllocationID reports whether v has the form of an allocation ID, the
// value of a snapshot cursor.
func isAllocationID(v string) bool { return len(domain.CheckCanonicalID("", v, true)) == 0 }

// isPosition reports whether v is the decimal form of a feed position, the
// value of a change feed cursor, as FeedCursor writes it.
func isPosition(v string) bool {
	p, err := strconv.ParseInt(v, 10, 64)
	return err == nil && p >= 0 && strconv.FormatInt(p, 10) == v
}

// FeedCursor returns the opaque cursor of change feed position p
// (application.FeedCursor).
func FeedCursor(p int64) string { return application.FeedCursor(p) }
