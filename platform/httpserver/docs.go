package httpserver

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// ElementsVersion is the pinned version of the npm package
// @stoplight/elements whose assets /docs serves (the version and renderer
// Huma's own /docs names, then loaded from a CDN). The assets are committed
// under docsassets/ and refreshed by `make docs-assets`, which checks them
// against the Subresource Integrity hashes below
// (docs/operations.md#api-documentation). Apache-2.0; its licence texts
// are committed beside the assets.
const ElementsVersion = "9.0.15"

// The SRI hashes (sha384) of the pinned assets, as Huma lists them.
const (
	elementsScriptIntegrity = "sha384-xjOcq9PZ/k+pGtPS/xcsCRXGjKKfTlIa4H1IYEnC+97jNa6sAMWTNrV6hY08W3GL"
	elementsStyleIntegrity  = "sha384-iVQBHadsD+eV0M5+ubRCEVXrXEBj+BqcuwjUwPoVJc0Pb1fmrhYSAhL+BFProHdV"
)

//go:embed docsassets/stoplight-elements-9.0.15
var docsAssets embed.FS

// docsAssetsPath is where the renderer's assets are served.
const docsAssetsPath = "/docs/assets/"

// serveDocs serves /docs, the API reference rendered by Stoplight Elements,
// and the renderer's assets under /docs/assets/, all from the binary: the
// page names no external URL, and its Content-Security-Policy allows only
// this origin, so it renders without the internet.
func serveDocs(mux *http.ServeMux, title string) {
	assets, err := fs.Sub(docsAssets, "docsassets/stoplight-elements-"+ElementsVersion)
	if err != nil {
		panic(err) // the embed pattern above names this directory
	}
	page := []byte(`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="referrer" content="no-referrer">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>` + htmlEscape(title) + `</title>
    <link rel="stylesheet" href="` + docsAssetsPath + `styles.min.css" integrity="` + elementsStyleIntegrity + `">
    <script src="` + docsAssetsPath + `web-components.min.js" integrity="` + elementsScriptIntegrity + `"></script>
  </head>
  <body style="height: 100vh;">
    <elements-api
      apiDescriptionUrl="/openapi.yaml"
      router="hash"
      layout="sidebar"
      tryItCredentialsPolicy="same-origin"
    ></elements-api>
  </body>
</html>`)
	csp := strings.Join([]string{
		"default-src 'none'",
		"base-uri 'none'",
		"connect-src 'self'",
		"form-action 'none'",
		"frame-ancestors 'none'",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"sandbox allow-same-origin allow-scripts",
		"script-src 'self'",
		"style-src 'unsafe-inline' 'self'",
	}, "; ")
	mux.HandleFunc("GET /docs", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", csp)
		_, _ = w.Write(page)
	})
	files := http.FileServerFS(assets)
	mux.HandleFunc("GET "+docsAssetsPath+"{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name != path.Base(name) || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		// The assets change only with ElementsVersion, which changes the binary.
		w.Header().Set("Cache-Control", "public, max-age=86400")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
	})
}

// htmlEscape escapes s for HTML text.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}
