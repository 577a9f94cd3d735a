// Command httpservice is the local cluster's small HTTP service image, for application-service
// tests and the demo: GET /healthz answers "ok" (a readiness and liveness probe), any other
// path a JSON object naming the service, its host (the Pod's name), the request and the
// MESSAGE environment variable. It listens on :$PORT (default 8080), exits 0 on SIGTERM and
// is built static (CGO_ENABLED=0) by deploy/images.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"service": "metallo-httpservice", "host": host, "method": r.Method, "path": r.URL.Path,
			"message": os.Getenv("MESSAGE"),
		})
	})
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	fmt.Printf("httpservice listening on :%s as %s\n", port, host)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "httpservice:", err)
		os.Exit(1)
	}
}
