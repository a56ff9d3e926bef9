package slurmharness

import (
	"os/exec"
	"testing"
	"time"
)

// terminateAll ends within its grace period however many processes ignore SIGTERM: each is
// killed once the one deadline has passed (Stop hung for ten minutes when two slurmd ignored
// SIGTERM past it).
func TestTerminateAllKillsEveryStubbornProcessAfterOneGracePeriod(t *testing.T) {
	var ps []*proc
	for i := 0; i < 3; i++ {
		// The trap is set before the shell says it is ready, so SIGTERM cannot come first.
		cmd := exec.Command("/bin/sh", "-c", `trap "" TERM; echo ready; while :; do sleep 1; done`)
		cmd.SysProcAttr = childAttrs()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		p, err := startProc(cmd)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 6)
		if _, err := out.Read(buf); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	start := time.Now()
	done := make(chan struct{})
	go func() { terminateAll(ps, 300*time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		for _, p := range ps {
			p.kill()
		}
		t.Fatal("terminateAll did not return within 20 s for three processes that ignore SIGTERM")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("terminateAll took %s with a grace of 300ms", took)
	}
	for i, p := range ps {
		if !p.exited() {
			t.Errorf("process %d still runs", i)
		}
	}
}
