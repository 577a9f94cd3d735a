package application

import (
	"encoding/base64"
	"strconv"
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
