package slurm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/jail"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// TestAJailOnARealCephFS puts the operator's jail scripts on a real network file system: a
// one-host CephFS (hack/cephfs.sh: a monitor, a BlueStore OSD, an MDS from Debian's packages)
// mounted with ceph-fuse twice, once as a client root may write with, once as a client whose
// root is squashed by the MDS (`root_squash` in its capability). It shows what the populate Job
// and the health check do there, a backup controller taking over from a spool there, and what
// a job's writes do while the metadata server is stopped for 30 s.
func TestAJailOnARealCephFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a CephFS needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse for ceph-fuse")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	script := filepath.Join(root, "hack", "cephfs.sh")
	dir := filepath.Join(os.TempDir(), "slurm-operator-cephfs-test")
	cephfs := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Env = append(os.Environ(), "CEPHFS_DIR="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/cephfs.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Cleanup(func() { cephfs("down") })
	plain := cephfs("up")
	squashed := cephfs("squashed")

	t.Run("the populate Job copies the jail with its owners and modes where root is root", func(t *testing.T) {
		src := populateSource(t)
		dst := filepath.Join(plain, "jail-a")
		must(t, os.Mkdir(dst, 0o755))
		if out, err := populate(src, dst); err != nil {
			t.Fatalf("populate on CephFS: %v\n%s", err, out)
		}
		checkOwner(t, filepath.Join(dst, "var/lib/slurm/state"), 64030, 0o700|os.ModeDir)
		checkOwner(t, filepath.Join(dst, "usr/bin/sudo"), 0, 0o755|os.ModeSetuid)
		if _, err := os.Stat(filepath.Join(dst, slurmfacts.JailMarkerFile)); err != nil {
			t.Errorf("no marker after populating: %v", err)
		}
	})

	t.Run("on a client whose root is squashed the populate Job refuses before copying anything, naming no_root_squash", func(t *testing.T) {
		src := populateSource(t)
		must(t, os.Mkdir(filepath.Join(plain, "jail-b"), 0o777))
		out, err := populate(src, filepath.Join(squashed, "jail-b"))
		if err == nil || !strings.Contains(out, "no_root_squash") || !strings.Contains(out, "nothing was copied") {
			t.Fatalf("populate through the squashed client: %v\n%s\nwant a refusal naming no_root_squash", err, out)
		}
		if left, _ := os.ReadDir(filepath.Join(plain, "jail-b")); len(left) != 0 {
			t.Errorf("the refused populate left %d entries", len(left))
		}
	})

	health := healthScript(t)
	check := func(t *testing.T, jailRoot string) (string, time.Duration) {
		t.Helper()
		// The check writes under /var/lib/slurm-operator/health of the jail it runs in; here
		// that folder is on the mount.
		s := strings.Replace(health, "PROBE_DIR=/var/lib/slurm-operator/health", "PROBE_DIR="+filepath.Join(jailRoot, "var/lib/slurm-operator/health"), 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s)
		cmd.Env = append(os.Environ(), "SLURMD_NODENAME=worker-0")
		// A file, not a pipe: the check leaves its write on a hung file system behind (no
		// signal ends it), and that would hold a pipe open until the file system answers.
		log, err := os.CreateTemp(t.TempDir(), "health")
		must(t, err)
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
		start := time.Now()
		err = cmd.Run()
		took := time.Since(start)
		out, _ := os.ReadFile(log.Name())
		if err != nil {
			t.Fatalf("the health check: %v\n%s", err, out)
		}
		return string(out), took
	}

	t.Run("the health check passes on the jail, and where root is squashed says so without failing", func(t *testing.T) {
		if out, _ := check(t, filepath.Join(plain, "jail-a")); strings.Contains(out, "failed") {
			t.Errorf("the health check on a sound CephFS jail:\n%s", out)
		}
		out, _ := check(t, filepath.Join(squashed, "jail-a"))
		if strings.Contains(out, "failed") || !strings.Contains(out, "root may not write") {
			t.Errorf("the health check through the squashed client:\n%s\nwant the root_squash notice and no failure", out)
		}
	})

	t.Run("two controllers with their StateSaveLocation on CephFS: the primary stops under a running job, the backup takes over from the state there and the job completes", func(t *testing.T) {
		spool := filepath.Join(plain, "controller-spool")
		must(t, os.Mkdir(spool, 0o755))
		checkBackupTakesOver(t, spool)
		// The state is on CephFS, not in a folder of the harness's.
		for _, f := range []string{"job_state", "node_state"} {
			if _, err := os.Stat(filepath.Join(spool, f)); err != nil {
				t.Errorf("slurmctld's %s on the CephFS spool: %v", f, err)
			}
		}
	})

	t.Run("the metadata server stopped for 30 s: a job's writes wait and go on, the health check says the jail hangs within its limit, then passes", func(t *testing.T) {
		f := filepath.Join(plain, "jail-a", "tmp", "job.out")
		// A job step writing a line a second, each to a new file and to its output: both need
		// the metadata server.
		job := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt 45 ]; do echo "$i $(date +%s)" >> "$0"; : > "$0.$i"; sleep 1; i=$((i + 1)); done`, f)
		must(t, job.Start())
		done := make(chan error, 1)
		go func() { done <- job.Wait() }()
		defer func() { _ = job.Process.Signal(syscall.SIGKILL) }()
		time.Sleep(5 * time.Second)
		cephfs("stop-mds")
		stopped := time.Now()
		out, took := check(t, filepath.Join(plain, "jail-a"))
		if !strings.Contains(out, "the jail hangs") || took > 25*time.Second {
			t.Errorf("the health check with the metadata server stopped took %s:\n%s\nwant 'the jail hangs' within its 10 s limit (and the free-space look's)", took.Round(time.Second), out)
		}
		time.Sleep(30*time.Second - time.Since(stopped))
		cephfs("start-mds")
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the job's writes failed across the outage: %v", err)
			}
		case <-time.After(3 * time.Minute):
			t.Fatal("the job's writes did not go on within 3 minutes of the metadata server's return")
		}
		data, err := os.ReadFile(f)
		must(t, err)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		var stall, last int64
		for i, line := range lines {
			var n, at int64
			if _, err := fmt.Sscan(line, &n, &at); err != nil || n != int64(i) {
				t.Fatalf("line %d of the job's output is %q, want %d and a time: nothing lost or reordered\n%s", i, line, i, data)
			}
			if i > 0 && at-last > stall {
				stall = at - last
			}
			last = at
		}
		if len(lines) != 45 {
			t.Errorf("the job wrote %d lines, want 45", len(lines))
		}
		t.Logf("the job's writes stopped for %d s at most (the metadata server was down 30 s), then went on: nothing lost", stall)
		if stall < 20 {
			t.Errorf("the longest gap between the job's writes was %d s: the metadata server's stop did not reach the file system", stall)
		}
		// Its own probe may still be held by the write that hung; the next run passes.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, _ := check(t, filepath.Join(plain, "jail-a"))
			if !strings.Contains(out, "failed") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the health check still fails two minutes after the metadata server came back:\n%s", out)
			}
			time.Sleep(5 * time.Second)
		}
	})
}

// populateSource is a small root file system with what the real one has that a squashed root
// cannot copy: a folder of the slurm user's, a setuid-root program.
func populateSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "var/lib/slurm/state"), 0o700))
	must(t, os.Chown(filepath.Join(src, "var/lib/slurm/state"), 64030, 64030))
	must(t, os.MkdirAll(filepath.Join(src, "usr/bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(src, "tmp"), 0o1777))
	must(t, os.Chmod(filepath.Join(src, "tmp"), 0o1777))
	must(t, os.WriteFile(filepath.Join(src, "usr/bin/sudo"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Chmod(filepath.Join(src, "usr/bin/sudo"), 0o755|os.ModeSetuid))
	return src
}

func populate(src, dst string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", jail.PopulateScript)
	cmd.Env = append(os.Environ(), "SOURCE="+src, "JAIL="+dst, "OVERWRITE=false", "REQUEST=cephfs", "MARKER="+slurmfacts.JailMarkerFile)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// healthScript is the rendered health check with only JailWritable, reporting (not draining).
func healthScript(t *testing.T) string {
	t.Helper()
	sc := spec(t, 1)
	sc.Spec.PeriodicChecks = &slurmv1alpha1.PeriodicChecks{Enabled: true, IntervalSeconds: 10, Action: slurmv1alpha1.HealthActionReport,
		Checks: []slurmv1alpha1.HealthCheck{slurmv1alpha1.HealthCheckJailWritable}}
	s := string(render(t, sc).files[slurmconf.NodeHealthScript])
	if !strings.Contains(s, "PROBE_DIR=/var/lib/slurm-operator/health") {
		t.Fatalf("the rendered health check has no PROBE_DIR line:\n%s", s)
	}
	return s
}

func checkOwner(t *testing.T, p string, uid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeDir) != mode {
		t.Errorf("%s: owner %d mode %v, want %d and %v", p, st.Uid, fi.Mode(), uid, mode)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
