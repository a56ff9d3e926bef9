package login

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runStopNotice runs StopNoticeScript(notice) with sh on a fake /proc holding the given
// process names and a fake /dev/pts with two terminals; it returns how long it took and what
// each terminal received.
func runStopNotice(t *testing.T, notice int32, comms []string, during func(proc, pts string)) (time.Duration, []string) {
	return runStopNoticeWith(t, notice, comms, during, nil)
}

func runStopNoticeWith(t *testing.T, notice int32, comms []string, during func(proc, pts string), env []string) (time.Duration, []string) {
	t.Helper()
	proc, pts := t.TempDir(), t.TempDir()
	for i, c := range comms {
		d := filepath.Join(proc, strings.Repeat("1", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "comm"), []byte(c+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"0", "3", "ptmx"} {
		if err := os.WriteFile(filepath.Join(pts, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", StopNoticeScript(notice))
	cmd.Env = append(append(os.Environ(), "PROC_DIR="+proc, "PTS_DIR="+pts), env...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(proc, pts)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the script failed: %v", err)
	}
	took := time.Since(start)
	var got []string
	for _, n := range []string{"0", "3", "ptmx", "7"} {
		b, _ := os.ReadFile(filepath.Join(pts, n))
		got = append(got, string(b))
	}
	return took, got
}

func TestStopNoticeTellsEverySessionAndWaitsForThemWithinTheNotice(t *testing.T) {
	// No ssh session: the pod stops at once, and no terminal is written to.
	took, got := runStopNotice(t, 30, []string{"sshd", "bash"}, nil)
	if took > 5*time.Second || got[0] != "" || got[1] != "" {
		t.Errorf("without sessions: took %v, terminals got %q", took, got)
	}

	// Sessions open for the whole notice: each terminal is told, and the pod waits it out.
	took, got = runStopNotice(t, 3, []string{"sshd", "sshd-session", "bash"}, nil)
	if took < 3*time.Second || took > 10*time.Second {
		t.Errorf("with a session for the whole notice of 3 s: took %v", took)
	}
	for i, want := range []bool{true, true, false} {
		if told := strings.Contains(got[i], "stops in 3 seconds"); told != want {
			t.Errorf("terminal %d told %v, want %v: %q", i, told, want, got[i])
		}
	}

	// The last session ends after a second: the pod stops then, well before the notice ends.
	took, _ = runStopNotice(t, 60, []string{"sshd-session"}, func(proc, _ string) {
		time.Sleep(time.Second)
		if err := os.WriteFile(filepath.Join(proc, "1", "comm"), []byte("bash\n"), 0o644); err != nil {
			t.Error(err)
		}
	})
	if took > 10*time.Second {
		t.Errorf("with the last session ended after 1 s of a 60 s notice: took %v", took)
	}

	// A terminal that appears during the notice (a session still starting) is told too, with
	// the time left.
	_, got = runStopNotice(t, 4, []string{"sshd-session"}, func(_, pts string) {
		time.Sleep(1500 * time.Millisecond)
		if err := os.WriteFile(filepath.Join(pts, "7"), nil, 0o644); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(got[3], "stops in") || strings.Contains(got[3], "stops in 4 seconds") {
		t.Errorf("a terminal that appeared 1.5 s into a 4 s notice got %q", got[3])
	}

	// A process that ends while the list is read (its comm unreadable: a directory stands in
	// for it) does not end the notice while a session is open.
	took, _ = runStopNotice(t, 3, []string{"sshd-session"}, func(proc, _ string) {
		if err := os.MkdirAll(filepath.Join(proc, "2", "comm"), 0o755); err != nil {
			t.Error(err)
		}
	})
	if took < 3*time.Second {
		t.Errorf("with a session and a process gone as the list was read: the notice ended after %v of 3 s", took)
	}

	// A notice of 0: at once, sessions or not.
	if took, got := runStopNotice(t, 0, []string{"sshd-session"}, nil); took > 5*time.Second || got[0] != "" {
		t.Errorf("notice 0: took %v, terminal got %q", took, got[0])
	}
}

// The hook starting at the very end of a second (date counts whole seconds) still gives the
// whole notice. The date on PATH is the real clock moved so that its first answer falls 1 ms
// before a second ends, as when the hook starts at x.999: every later answer is a second on.
func TestStopNoticeIsNeverShortByTheSecondItStartedIn(t *testing.T) {
	bin, state := t.TempDir(), filepath.Join(t.TempDir(), "shift")
	script := "#!/bin/sh\nnow=$(/bin/date +%s%N)\n" +
		"if [ -e " + state + " ]; then d=$(cat " + state + "); else d=$((999000000 - now % 1000000000)); echo $d >" + state + "; fi\n" +
		"echo $(((now + d) / 1000000000))\n"
	if err := os.WriteFile(filepath.Join(bin, "date"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	took, _ := runStopNoticeWith(t, 3, []string{"sshd-session"}, nil, []string{"PATH=" + bin + ":" + os.Getenv("PATH")})
	if took < 3*time.Second || took > 10*time.Second {
		t.Errorf("a notice of 3 s that started at a second's end: took %v", took)
	}
}
