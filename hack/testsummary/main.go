// Command testsummary reads `go test -json`, prints the tests' output as `go test -v` would, and,
// when a test failed, prints again at the end what each failed test said last. The node tests
// dump every container's log when they fail; without the summary, the failure's own message is
// buried far above the end of a long log.
//
//	go test -json ./test/node/ | go run ./hack/testsummary
//
// It exits 1 when a test or a package failed; run it under pipefail, so that go test's own
// status counts too.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// tail is how many lines of each failed test are printed again.
const tail = 40

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// summary collects what the stream says.
type summary struct {
	output map[string][]string // package + " " + test → its output lines
	failed []string            // keys of failed tests, in the order they ended
	broken bool                // a package failed without a failed test (a build, a panic)
}

func newSummary() *summary { return &summary{output: map[string][]string{}} }

func key(e event) string { return e.Package + " " + e.Test }

// add takes one event, writing its output to w.
func (s *summary) add(e event, w io.Writer) {
	switch e.Action {
	case "output", "build-output":
		_, _ = io.WriteString(w, e.Output)
		if e.Test != "" && !strings.HasPrefix(e.Output, "=== ") {
			s.output[key(e)] = append(s.output[key(e)], strings.TrimRight(e.Output, "\n"))
		}
	case "fail", "build-fail":
		if e.Test != "" {
			s.failed = append(s.failed, key(e))
		} else {
			s.broken = true
		}
	}
}

// leaves are the failed tests none of whose subtests failed: a parent fails with its children,
// and its own output is what the children's failure made it print (dumps).
func (s *summary) leaves() []string {
	var out []string
	for _, k := range s.failed {
		leaf := true
		for _, other := range s.failed {
			if strings.HasPrefix(other, k+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			out = append(out, k)
		}
	}
	return out
}

// report is the summary printed at the end, empty when nothing failed.
func (s *summary) report() string {
	leaves := s.leaves()
	if len(leaves) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== %d failed test(s), each with its last %d lines of output:\n", len(leaves), tail)
	for _, k := range leaves {
		pkg, test, _ := strings.Cut(k, " ")
		fmt.Fprintf(&b, "--- FAIL: %s (%s)\n", test, pkg)
		lines := s.output[k]
		if len(lines) > tail {
			lines = lines[len(lines)-tail:]
		}
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func (s *summary) ok() bool { return !s.broken && len(s.failed) == 0 }

func main() {
	s := newSummary()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event (some of go's own messages): passed on as it is.
			fmt.Println(in.Text())
			continue
		}
		s.add(e, os.Stdout)
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	fmt.Print(s.report())
	if !s.ok() {
		os.Exit(1)
	}
}
