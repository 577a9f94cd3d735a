// Command httpservice is the local cluster's small HTTP service image, for application-service
// tests and the demo: GET /healthz answers "ok" (a readiness and liveness probe), any other
// path a JSON object naming the service, its host (the Pod's name), the request and the
// MESSAGE environment variable. It listens on :$PORT (default 8080), exits 0 on SIGTERM and
// is built static (CGO_ENABLED=0) by deploy/images.
//
// `httpservice get [-ca FILE] [-token FILE] URL` is its client, for tests of what a Pod reaches:
// it prints the response's status line and body, verifying an https URL's certificate with the
// CA bundle FILE (the system's without -ca) and sending the bearer token read from -token; it
// exits 1 when the request fails or the status is not 2xx.
package main

import (
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
