// Command pause is the local cluster's pause image (the sandbox container of every Pod on the
// real node): it holds the Pod's namespaces open, reaps the zombies of the processes that
// share its PID namespace, and exits 0 on SIGTERM or SIGINT. Built static (CGO_ENABLED=0) by
// deploy/images.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
