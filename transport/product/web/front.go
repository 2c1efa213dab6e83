package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Elsewhere is what a git node answers browsers on its public port when
// the page is served elsewhere (a cluster: api-serve serves it). With
// webURL set, / and /{owner}/{name} redirect to the same path there;
// without, / is a short note on how to clone from this address and the
// rest is 404. cloneURL (RGIT_PUBLIC_URL) names the clone address; ""
// uses the address the browser used.
func Elsewhere(webURL, cloneURL string) http.Handler {
	webURL, cloneURL = strings.TrimSuffix(webURL, "/"), strings.TrimSuffix(cloneURL, "/")
	mux := http.NewServeMux()
	notFound := func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "page not found: this address serves git only", http.StatusNotFound)
	}
	if webURL != "" {
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, webURL+"/", http.StatusFound)
		})
		mux.HandleFunc("GET /{owner}/{name}", func(w http.ResponseWriter, r *http.Request) {
			name := strings.TrimSuffix(r.PathValue("name"), ".git")
			http.Redirect(w, r, webURL+"/"+url.PathEscape(r.PathValue("owner"))+"/"+url.PathEscape(name), http.StatusFound)
		})
	} else {
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			base := cloneURL
			if base == "" {
				scheme := "http"
				if r.TLS != nil {
					scheme = "https"
				}
				base = scheme + "://" + r.Host
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Cache-Control", "no-store")
			fmt.Fprintf(w, "rgit: this address serves git over HTTP.\n\n  git clone %s/OWNER/NAME.git\n\n"+
				"The web page and the read API are served by rgit api-serve (set RGIT_WEB_URL to send browsers there).\n", base)
		})
	}
	mux.HandleFunc("/", notFound)
	return mux
}
