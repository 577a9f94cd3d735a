package httpserver

import (
	"crypto/sha512"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/pharos-metallo/metallo/platform/auth"
)

// TestDocsAndEveryAssetItNamesAreServedByTheBinary reads /docs as a browser
// would: the page names no external URL, its policy allows only this
// origin, and every asset it names is served here with the integrity hash
// the page states.
func TestDocsAndEveryAssetItNamesAreServedByTheBinary(t *testing.T) {
	srv := testServer(t, auth.Chain{})
	page := get(t, srv.URL+"/docs", "text/html; charset=utf-8")
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "//unpkg") {
		t.Fatalf("/docs names an external URL:\n%s", page)
	}
	resp, err := http.Get(srv.URL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	assets := regexp.MustCompile(`(?:src|href)="([^"]+)" integrity="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(assets) != 2 {
		t.Fatalf("want the script and the style sheet, found %v in\n%s", assets, page)
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	for _, a := range assets {
		ext := a[1][strings.LastIndex(a[1], "."):]
		body := get(t, srv.URL+a[1], types[ext])
		sum := sha512.Sum384([]byte(body))
		if got := "sha384-" + base64.StdEncoding.EncodeToString(sum[:]); got != a[2] {
			t.Errorf("%s: integrity %s, page states %s", a[1], got, a[2])
		}
	}
	if !strings.Contains(page, `apiDescriptionUrl="/openapi.yaml"`) {
		t.Errorf("/docs does not render this server's document:\n%s", page)
	}
	for _, p := range []string{"/docs/assets/LICENSE-missing", "/docs/assets/..%2Fdocs.go"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

func get(t *testing.T, url, contentType string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentType {
		t.Fatalf("GET %s: %d %q, want 200 %q", url, resp.StatusCode, resp.Header.Get("Content-Type"), contentType)
	}
	return string(b)
}
