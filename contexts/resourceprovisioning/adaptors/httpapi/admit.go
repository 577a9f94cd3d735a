package httpapi

import (
	"fmt"
	"net/http"

	"github.com/pharos-metallo/metallo/platform/auth"
	"github.com/pharos-metallo/metallo/platform/httpserver"
)

// betoPrincipal is the only principal allowed to post Beto events.
func betoPrincipal() auth.Principal { return auth.Principal{Kind: auth.KindService, ID: "beto"} }

// reporterAdmit is the admission of the Site agent's routes: exactly the
// principal site:<path site>, checked before the body is read.
func reporterAdmit() map[string]any {
	admit := httpserver.AdmitMetadata(httpserver.AdmitPathPrincipal(auth.KindSite, "site"))
	return httpserver.WithPrincipals(admit, auth.KindSite+":{site}")
}

// betoAdmit is the admission of the Beto event intake: only service:beto,
// checked before the body is read.
func betoAdmit() map[string]any {
	admit := httpserver.AdmitMetadata(func(p auth.Principal, _ func(string) string) error {
		if p != betoPrincipal() {
			return httpserver.NewProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not post here; only %s may", p, betoPrincipal()))
		}
		return nil
	})
	return httpserver.WithPrincipals(admit, betoPrincipal().String())
}

// readerAdmit is the admission of the reads: any service principal
// (service:*).
func readerAdmit() map[string]any {
	return httpserver.WithPrincipals(httpserver.AdmitMetadata(httpserver.AdmitKinds(auth.KindService)), auth.KindService+":*")
}
