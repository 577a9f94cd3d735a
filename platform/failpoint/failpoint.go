// Package failpoint provides crash points for tests: code calls Hit(name)
// right after each durable step or external call; a test arms a name
// through the environment (METALLO_FAILPOINTS=name or name@n for the n-th
// hit, several separated by commas) and the process kills itself with
// SIGKILL at that point — a crash, not an exit: no deferred function, no
// shutdown hook and no buffered write runs. Unarmed points do nothing, so
// the points stay compiled into production binaries at the cost of a map
// lookup.
package failpoint

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// EnvVar names the environment variable that arms failpoints.
const EnvVar = "METALLO_FAILPOINTS"

// Set is the armed failpoints of a process. The zero value and nil are
// inert.
type Set struct {
	mu    sync.Mutex
	armed map[string]int // name -> the hit that kills
	hits  map[string]int
	log   io.Writer
	kill  func()
}

// Parse arms the points of spec: "a,b@3" kills at the first hit of a or the
// third hit of b. known lists the valid names; any other name is an error,
// so a typo never leaves a test silently unarmed. Before killing, the
// point writes one line naming itself to log.
func Parse(spec string, known []string, log io.Writer) (*Set, error) {
	s := &Set{armed: map[string]int{}, hits: map[string]int{}, log: log, kill: killSelf}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, nth, found := strings.Cut(part, "@")
		n := 1
		if found {
			v, err := strconv.Atoi(nth)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("failpoint %q: the hit count must be a positive integer", part)
			}
			n = v
		}
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		if !ok {
			return nil, fmt.Errorf("unknown failpoint %q; known: %s", name, strings.Join(known, ", "))
		}
		s.armed[name] = n
	}
	return s, nil
}

// Armed reports whether any point is armed.
func (s *Set) Armed() bool { return s != nil && len(s.armed) > 0 }

// Hit counts a hit of name and kills the process when name is armed for
// this hit.
func (s *Set) Hit(name string) {
	if s == nil || len(s.armed) == 0 {
		return
	}
	s.mu.Lock()
	s.hits[name]++
	fire := s.armed[name] != 0 && s.hits[name] == s.armed[name]
	s.mu.Unlock()
	if !fire {
		return
	}
	if s.log != nil {
		fmt.Fprintf(s.log, "failpoint %s: hit %d, killing the process with SIGKILL\n", name, s.armed[name])
	}
	s.kill()
}

// killSelf ends the process as SIGKILL does.
//
// A process that is its PID namespace's init (PID 1: a container's main
// process in a Pod) cannot be killed by a signal of its own: the kernel
// drops the signals init has no handler for, and SIGKILL can have none. There
// it ends with exit_group(137), the status a SIGKILLed process reports and
// just as abrupt: no deferred function, no shutdown hook and no buffered
// write runs (docs/testing.md, "The Runtime as a Pod").
func killSelf() {
	if os.Getpid() == 1 {
		syscall.Exit(128 + int(syscall.SIGKILL))
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; never return into the caller
}
