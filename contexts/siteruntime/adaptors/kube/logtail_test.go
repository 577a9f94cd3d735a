package kube_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pharos-metallo/metallo/contexts/siteruntime/adaptors/kube"
)

// criRecord is the container runtime's largest log record: containerd
// splits a longer line into partial records of this size, and the
// kubelet's tailLines counts records, not lines.
const criRecord = 16 << 10

// kubeletTail stands in for the kubelet's pods/log with tailLines (a unit
// test: no cluster). It answers the last lines records of log the way the
// kubelet does: records are the log's lines, each line longer than
// criRecord split into parts, a last line without a newline being a
// record too. It counts its calls.
type kubeletTail struct {
	log   []byte
	recs  [][]byte // the log's records, split once
	calls int
	// asked are the tailLines values asked, in order.
	asked []int64
}

func (k *kubeletTail) records() [][]byte {
	if k.recs != nil {
		return k.recs
	}
	out := [][]byte{}
	rest := k.log
	for len(rest) > 0 {
		end := bytes.IndexByte(rest, '\n') + 1
		if end == 0 {
			end = len(rest)
		}
		line := rest[:end]
		rest = rest[end:]
		for len(line) > criRecord {
			out = append(out, line[:criRecord])
			line = line[criRecord:]
		}
		out = append(out, line)
	}
	k.recs = out
	return out
}

func (k *kubeletTail) read(lines, keep int64) ([]byte, int64, error) {
	k.calls++
	k.asked = append(k.asked, lines)
	recs := k.records()
	if int64(len(recs)) > lines {
		recs = recs[int64(len(recs))-lines:]
	}
	var total int64
	for _, r := range recs {
		total += int64(len(r))
	}
	// The last keep bytes of the records, without joining them all.
	var tail [][]byte
	var have int64
	for i := len(recs) - 1; i >= 0 && have < keep; i-- {
		r := recs[i]
		if have+int64(len(r)) > keep {
			r = r[int64(len(r))-(keep-have):]
		}
		tail = append(tail, r)
		have += int64(len(r))
	}
	slices.Reverse(tail)
	return bytes.Join(tail, nil), total, nil
}

// PodLog's search for a log's last bytes over the kubelet's tailLines
// answers exactly the log's last tail_bytes bytes, truncated when the log
// is longer, and the whole log otherwise — for short logs, several MiB of
// short lines, one line of several MiB without a newline (split into the
// runtime's partial records, which tailLines counts as lines), empty
// lines only, escape sequences and invalid UTF-8 — comparing each answer
// with the full log. The kubelet is simulated (tailLines over records);
// the real kubelet's answer is the real-node test's.
func TestTheLogTailIsExactlyTheLastBytesOfTheFullLogWhateverItsLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 24))
	many := func(n int, line func(i int) string) []byte {
		var b bytes.Buffer
		for i := range n {
			b.WriteString(line(i))
		}
		return b.Bytes()
	}
	noisy := make([]byte, 3<<20)
	for i := range noisy {
		noisy[i] = byte(rng.IntN(256))
	}
	cases := map[string][]byte{
		"empty":                              {},
		"one short line":                     []byte("hello\n"),
		"no final newline":                   []byte("a\nb\nc"),
		"several MiB of short lines":         many(200_000, func(i int) string { return "step " + string(rune('a'+i%26)) + " done\n" }),
		"one line of 5 MiB":                  bytes.Repeat([]byte("x"), 5<<20),
		"empty lines only":                   bytes.Repeat([]byte("\n"), 3<<20),
		"escape sequences and invalid UTF-8": many(100_000, func(int) string { return "\x1b[31mred\x1b[0m \xff\xfe\xc3\x28 \x00\n" }),
		"random bytes":                       noisy,
		"long lines mixed with short":        many(300, func(i int) string { return string(bytes.Repeat([]byte{'y'}, (i%7)*10_000)) + "\n" }),
	}
	for name, log := range cases {
		for _, tail := range []int64{1, 100, 4096, 65536, 1 << 20} {
			k := &kubeletTail{log: log}
			got, err := kube.LogTail(tail, k.read)
			if err != nil {
				t.Fatalf("%s, tail %d: %v", name, tail, err)
			}
			want, truncated := log, false
			if int64(len(log)) > tail {
				want, truncated = log[int64(len(log))-tail:], true
			}
			if !bytes.Equal(got.Bytes, want) || got.Truncated != truncated {
				t.Fatalf("%s, tail %d: got %d bytes truncated %v, want %d bytes truncated %v (tailLines asked %v)",
					name, tail, len(got.Bytes), got.Truncated, len(want), truncated, k.asked)
			}
			if k.calls > 40 {
				t.Fatalf("%s, tail %d: %d reads of the log", name, tail, k.calls)
			}
		}
	}
}
