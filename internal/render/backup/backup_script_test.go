package backup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runBackup runs the backup Job's script with sh, as the Job does, in a temporary folder.
func runBackup(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", Script)
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CLUSTER=demo", "FROM=24.11", "TO=26.05"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestTheBackupScriptWritesAWholeCopyOrNothing(t *testing.T) {
	dir := t.TempDir()
	state, backup := filepath.Join(dir, "state"), filepath.Join(dir, "backup")
	for _, d := range []string{state, backup} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// A folder that is not slurmctld's state is refused, and no folder is left but a partial one.
	out, err := runBackup(t, "BACKUP="+backup, "STATE="+state)
	if err == nil || !strings.Contains(out, "holds no slurmctld state (no job_state, no node_state)") {
		t.Fatalf("an empty state folder: %v\n%s", err, out)
	}
	whole, _ := filepath.Glob(filepath.Join(backup, "demo", "*-slurm-24.11-to-26.05"))
	if len(whole) != 0 {
		t.Fatalf("a failed backup left %v looking whole", whole)
	}

	// The state: copied whole, with checksums, under a name that says when and what.
	for name, data := range map[string]string{"job_state": "jobs", "node_state": "nodes", "hash.0/job.1/script": "#!/bin/sh"} {
		p := filepath.Join(state, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err = runBackup(t, "BACKUP="+backup, "STATE="+state)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	whole, _ = filepath.Glob(filepath.Join(backup, "demo", "*-slurm-24.11-to-26.05"))
	if len(whole) != 1 || !strings.Contains(out, "backup written to "+whole[0]) {
		t.Fatalf("backups %v after:\n%s", whole, out)
	}
	got, err := os.ReadFile(filepath.Join(whole[0], "statesave", "hash.0", "job.1", "script"))
	if err != nil || string(got) != "#!/bin/sh" {
		t.Fatalf("the copy: %q %v", got, err)
	}
	sums, err := os.ReadFile(filepath.Join(whole[0], "SHA256SUMS"))
	if err != nil || strings.Count(string(sums), "\n") != 3 {
		t.Fatalf("SHA256SUMS: %v\n%s", err, sums)
	}
	check := exec.Command("sha256sum", "-c", "--quiet", "SHA256SUMS")
	check.Dir = whole[0]
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the checksums do not verify: %v\n%s", err, out)
	}

	// Without the backup volume, it says so.
	out, err = runBackup(t, "BACKUP="+filepath.Join(dir, "missing"), "STATE="+state)
	if err == nil || !strings.Contains(out, "the backup volume is not mounted") {
		t.Fatalf("no backup volume: %v\n%s", err, out)
	}
	// A slurmdbd.conf without a database is refused before anything is dumped.
	conf := filepath.Join(dir, "slurmdbd.conf")
	if err := os.WriteFile(conf, []byte("DbdHost=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runBackup(t, "BACKUP="+backup, "STATE="+state, "DBD_CONF="+conf)
	if err == nil || !strings.Contains(out, "names no StorageHost or StorageLoc") {
		t.Fatalf("a slurmdbd.conf without a database: %v\n%s", err, out)
	}
}

// Scheduled backups keep the newest KEEP of their own and delete the older ones and the
// unfinished ones; a backup taken before an upgrade is never deleted.
func TestTheScheduledBackupKeepsTheNewest(t *testing.T) {
	dir := t.TempDir()
	state, backup := filepath.Join(dir, "state"), filepath.Join(dir, "backup")
	kept := filepath.Join(backup, "demo")
	for _, d := range []string{
		state,
		filepath.Join(kept, "20260101T000000Z-scheduled"),
		filepath.Join(kept, "20260102T000000Z-scheduled"),
		filepath.Join(kept, "20260103T000000Z-scheduled.partial"),
		filepath.Join(kept, "20250101T000000Z-slurm-24.11-to-26.05"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(state, "job_state"), []byte("jobs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runBackup(t, "BACKUP="+backup, "STATE="+state, "NAME=scheduled", "KEEP=banana"); err == nil ||
		!strings.Contains(out, "KEEP is banana, not a number above 0") {
		t.Fatalf("KEEP=banana: %v\n%s", err, out)
	}
	out, err := runBackup(t, "BACKUP="+backup, "STATE="+state, "NAME=scheduled", "KEEP=2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sched, _ := filepath.Glob(filepath.Join(kept, "*-scheduled*"))
	if len(sched) != 2 || !strings.HasSuffix(sched[0], "20260102T000000Z-scheduled") || strings.HasPrefix(filepath.Base(sched[1]), "2026010") {
		t.Errorf("the scheduled backups after KEEP=2: %v\n%s", sched, out)
	}
	if !strings.Contains(out, "deleting "+filepath.Join(kept, "20260101T000000Z-scheduled")+" (keeping the 2 newest)") ||
		!strings.Contains(out, "(a run that did not finish)") {
		t.Errorf("the script did not say what it deleted:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(kept, "20250101T000000Z-slurm-24.11-to-26.05")); err != nil {
		t.Errorf("the backup before an upgrade was deleted: %v", err)
	}
	// Root's alone, however the volume is mounted: no one else may list or read a backup.
	for _, p := range []string{sched[1], filepath.Join(sched[1], "SHA256SUMS")} {
		if st, err := os.Stat(p); err != nil {
			t.Error(err)
		} else if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want nothing for group and others", p, st.Mode().Perm())
		}
	}
	// The new backup is whole: its checksums verify.
	check := exec.Command("sha256sum", "-c", "--quiet", "SHA256SUMS")
	check.Dir = sched[1]
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the new backup's checksums: %v\n%s", err, out)
	}
}
