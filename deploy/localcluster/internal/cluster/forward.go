package cluster

// The API server's forwarder on the pod network (README.md, "The real node"): the API server
// listens on loopback only and advertises the bridge's host address, which exists only while
// the real node runs. The forwarder is a process of the node: it listens on that address with
// the API server's port and copies each connection to the API server's loopback listener, so a
// Pod reaching kubernetes.default (kube-proxy rewrites the Service's cluster IP to the
// advertised address) talks TLS to the API server itself. It holds the machine's real-node lock
// like containerd and the kubelet, and stops with the node.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// forwardComponent is the forwarder's component name (pid and log file).
const forwardComponent = "apiserver-forward"

// Forward is the forward command: it listens on --listen and copies every connection to --to
// until SIGTERM or SIGINT. --dir names the cluster (it keeps the process recognisable as the
// cluster's). It returns the process's exit code.
func Forward(args []string) int {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.String("dir", "", "the cluster's state directory")
	listen := fs.String("listen", "", "address to listen on (host:port)")
	to := fs.String("to", "", "address to forward to (host:port)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *listen == "" || *to == "" {
		logf("forward: --listen and --to are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := forward(ctx, *listen, *to); err != nil {
		logf("forward: %v", err)
		return 1
	}
	return 0
}

// forward accepts connections on listen and copies each, both ways, to a new connection to to,
// until ctx ends.
func forward(ctx context.Context, listen, to string) error {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	logf("forwarding %s to %s", listen, to)
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipe(ctx, c, to)
		}()
	}
}

// pipe copies c to a new connection to to and back, closing both when either side ends.
func pipe(ctx context.Context, c net.Conn, to string) {
	defer c.Close()
	d := net.Dialer{Timeout: 10 * time.Second}
	up, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		logf("forward %s: %v", c.RemoteAddr(), err)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
}
