package httpapi

import (
	"errors"
	"net/http"

	"github.com/pharos-metallo/metallo/platform/ijson"
)

// malformedStatus is the status of a body the codec refused as
// siteprotocol.ErrMalformed, by the one rule of both central roles
// (docs/architecture.md#one-answer-per-fault): 400 when the bytes are not
// one I-JSON text (not JSON, invalid UTF-8, an escaped lone surrogate, a
// member named twice, data after the value, nested too deep); 422 for a
// well-formed text the protocol refuses (a null, a NUL, a member of the
// wrong type or unknown, a number that does not fit its field or the
// protocol's exact integers).
func malformedStatus(err error) int {
	if je := (*ijson.Error)(nil); errors.As(err, &je) && je.Rule.NotText() {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}
