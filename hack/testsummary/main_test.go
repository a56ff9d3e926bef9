package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// stream is what go test -json writes for a parent test whose second subtest fails after
// printing more lines than the summary keeps, and whose own output ends with a dump.
func stream(t *testing.T) []event {
	t.Helper()
	var lines []string
	out := func(test, text string) {
		b, err := json.Marshal(event{Action: "output", Package: "p", Test: test, Output: text + "\n"})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	act := func(action, test string) {
		b, _ := json.Marshal(event{Action: action, Package: "p", Test: test})
		lines = append(lines, string(b))
	}
	out("TestA", "=== RUN   TestA")
	out("TestA/one", "=== RUN   TestA/one")
	out("TestA/one", "    a_test.go:1: fine")
	act("pass", "TestA/one")
	out("TestA/two", "=== RUN   TestA/two")
	for i := range tail + 5 {
		out("TestA/two", "    a_test.go:2: line "+string(rune('a'+i%26)))
	}
	out("TestA/two", "    a_test.go:3: job 7 COMPLETED: not after 2m0s; last seen:")
	out("TestA/two", "        7 PENDING")
	act("fail", "TestA/two")
	out("TestA", "    env_test.go:9: logs of every container")
	act("fail", "TestA")
	act("fail", "")
	var events []event
	for _, l := range lines {
		var e event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	return events
}

func TestReportRepeatsTheFailedLeafLast(t *testing.T) {
	s := newSummary()
	var all strings.Builder
	for _, e := range stream(t) {
		s.add(e, &all)
	}
	if !strings.Contains(all.String(), "=== RUN   TestA/two\n") || !strings.Contains(all.String(), "logs of every container") {
		t.Errorf("the output is not passed on as go test -v prints it:\n%s", all.String())
	}
	if s.ok() {
		t.Error("a stream with a failed test is ok")
	}
	r := s.report()
	if !strings.HasPrefix(r, "\n=== 1 failed test(s)") || !strings.Contains(r, "--- FAIL: TestA/two (p)\n") {
		t.Errorf("report names not just the failed leaf:\n%s", r)
	}
	if !strings.HasSuffix(r, "a_test.go:3: job 7 COMPLETED: not after 2m0s; last seen:\n        7 PENDING\n") {
		t.Errorf("report does not end with the failure's message:\n%s", r)
	}
	if strings.Contains(r, "logs of every container") || strings.Contains(r, "fine") || strings.Contains(r, "=== RUN") {
		t.Errorf("report holds the parent's dump, a passed test or run lines:\n%s", r)
	}
	if n := strings.Count(r, "\n"); n != tail+3 {
		t.Errorf("report has %d line ends, want a blank line, the heading, the name and %d lines", n, tail)
	}
}

func TestPassedStreamIsOKAndSilent(t *testing.T) {
	s := newSummary()
	var all strings.Builder
	s.add(event{Action: "output", Package: "p", Test: "TestB", Output: "=== RUN   TestB\n"}, &all)
	s.add(event{Action: "pass", Package: "p", Test: "TestB"}, &all)
	s.add(event{Action: "pass", Package: "p"}, &all)
	if !s.ok() || s.report() != "" {
		t.Errorf("a passed stream: ok %v, report %q", s.ok(), s.report())
	}
}

func TestPackageFailureWithoutATestIsNotOK(t *testing.T) {
	s := newSummary()
	s.add(event{Action: "fail", Package: "p"}, &strings.Builder{})
	if s.ok() {
		t.Error("a failed package (a build failure, a panic before any test) is ok")
	}
}
