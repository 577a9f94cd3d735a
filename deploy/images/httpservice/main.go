// Command httpservice is the local cluster's small HTTP service image, for application-service
// tests and the demo: GET /healthz answers "ok" (a readiness and liveness probe), any other
// path a JSON object naming the service, its host (the Pod's name), the request and the
// MESSAGE environment variable. POST /echo answers 201 with the request's headers and body as
// JSON, two X-Multi values and a Set-Cookie header (for the proxy's header filter); GET
// /bytes?n=N answers N bytes of "b" (at most 8 MiB; for bounded answers); GET
// /trickle?n=N&every=D answers its status and headers at once, then N bytes of "t" one at a time,
// each flushed, D apart (default 600 bytes, 1s: a service that trickles its answer, for the
// Runtime's proxy bound). It listens on :$PORT (default 8080), exits 0 on SIGTERM and
// is built static (CGO_ENABLED=0) by deploy/images.
//
// When its arguments begin with --model_name=NAME (then optionally --backend=huggingface, then
// model arguments, as a KServe ServingRuntime renders a serving Pod's; inference.go), it also
// speaks the KServe v1 inference protocol of that one model: GET /v1/models/NAME answers
// {"name":NAME,"ready":true}, POST /v1/models/NAME:predict with {"instances":[...]} answers
// {"predictions":[...]} (the instances echoed), another model 404 and a malformed body 400, with
// a JSON error. The local cluster's ClusterServingRuntime metallo-httpservice runs it so.
//
// `httpservice get [-ca FILE] [-token FILE] URL` is its client, for tests of what a Pod reaches:
// it prints the response's status line and body, verifying an https URL's certificate with the
// CA bundle FILE (the system's without -ca) and sending the bearer token read from -token; it
// exits 1 when the request fails or the status is not 2xx.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		if err := get(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "httpservice get:", err)
			os.Exit(1)
		}
		return
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	model, err := modelOf(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpservice:", err)
		os.Exit(2)
	}
	srv := &http.Server{Addr: ":" + port, Handler: handler(host, model), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if model != nil {
		fmt.Printf("httpservice listening on :%s as %s, serving model %s (KServe v1 protocol; model arguments %q)\n", port, host, model.name, model.args)
	} else {
		fmt.Printf("httpservice listening on :%s as %s\n", port, host)
	}
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "httpservice:", err)
		os.Exit(1)
	}
}

// handler is the service's routes; with a model (modelOf), also the KServe v1 inference
// protocol's (v1Routes).
func handler(host string, model *inferenceModel) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.Header().Set("Set-Cookie", "session=from-the-service")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"host": host, "headers": r.Header, "body": string(body)})
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 || n > 8<<20 {
			http.Error(w, "n must be 0 to 8388608", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(bytes.Repeat([]byte("b"), n))
	})
	mux.HandleFunc("GET /trickle", trickle)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"service": "metallo-httpservice", "host": host, "method": r.Method, "path": r.URL.Path,
			"message": os.Getenv("MESSAGE"),
		})
	})
	if model != nil {
		model.routes(mux)
	}
	return mux
}

// trickle answers GET /trickle?n=N&every=D: the status and headers at once, then N bytes of "t"
// (default 600, at most 86400), each written and flushed D after the one before (default 1s,
// 1ms to 1m), until the client goes away.
func trickle(w http.ResponseWriter, r *http.Request) {
	n, every := 600, time.Second
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 || n > 86400 {
			http.Error(w, "n must be 0 to 86400", http.StatusBadRequest)
			return
		}
	}
	if v := r.URL.Query().Get("every"); v != "" {
		var err error
		if every, err = time.ParseDuration(v); err != nil || every < time.Millisecond || every > time.Minute {
			http.Error(w, "every must be a duration from 1ms to 1m", http.StatusBadRequest)
			return
		}
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "the connection cannot be flushed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	t := time.NewTicker(every)
	defer t.Stop()
	for range n {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if _, err := w.Write([]byte("t")); err != nil {
			return
		}
		flusher.Flush()
	}
}

// get is the client: GET one URL, print the status line and body.
func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	ca := fs.String("ca", "", "CA bundle (PEM) that verifies an https URL's certificate")
	tokenFile := fs.String("token", "", "file holding a bearer token to send")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: httpservice get [-ca FILE] [-token FILE] URL")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s holds no PEM certificate", *ca)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return err
	}
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n%s\n", resp.Proto, resp.Status, body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", fs.Arg(0), resp.Status)
	}
	return nil
}
