package application

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// FeedCursorPrefix starts the value inside a change feed cursor.
const FeedCursorPrefix = "c1:"

// FeedCursor returns the opaque cursor of change feed position p: the
// base64url (unpadded) of "c1:<position>", as the HTTP reads issue it and
// the in-process owner adaptor answers it, so a follower's cursor means the
// same whichever way it read (docs/resource-provisioning.md#cursors).
func FeedCursor(p int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(FeedCursorPrefix + strconv.FormatInt(p, 10)))
}

// ParseFeedCursor returns the position inside a cursor FeedCursor wrote, or
// false when cursor is not one.
func ParseFeedCursor(cursor string) (int64, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, false
	}
	v, ok := strings.CutPrefix(string(raw), FeedCursorPrefix)
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseInt(v, 10, 64)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != v {
		return 0, false
	}
	return p, true
}
