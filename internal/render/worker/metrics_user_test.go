package worker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// runMetricsUserScript runs MetricsUserScript with sh on a jail made of the given files.
func runMetricsUserScript(t *testing.T, files map[string]string) (string, map[string]string) {
	t.Helper()
	jail := t.TempDir()
	if err := os.MkdirAll(filepath.Join(jail, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(jail, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", MetricsUserScript)
	cmd.Env = append(os.Environ(), "JAIL="+jail)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the script failed: %v\n%s", err, out)
	}
	after := map[string]string{}
	for _, name := range []string{"etc/passwd", "etc/group"} {
		b, _ := os.ReadFile(filepath.Join(jail, name))
		after[name] = string(b)
	}
	return string(out), after
}

const (
	oldPasswd = "root:x:0:0:root:/root:/bin/bash\nslurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\nalice:x:1000:1000::/home/alice:/bin/bash\n"
	oldGroup  = "root:x:0:\nslurm:x:64030:\nalice:x:1000:\n"
)

// A jail populated before the images had the exporter's user gets it, once, and keeps every
// line it had; a jail not yet populated, or one whose id is taken, is left as it is.
func TestMetricsUserScriptAddsTheUserToAnOldJailOnce(t *testing.T) {
	marker := slurmfacts.JailMarkerFile
	old := map[string]string{"etc/passwd": oldPasswd, "etc/group": oldGroup, marker: ""}
	_, after := runMetricsUserScript(t, old)
	wantUser := "slurm-metrics:x:64032:64032:Slurm metrics (read-only):/nonexistent:/usr/sbin/nologin\n"
	if after["etc/passwd"] != oldPasswd+wantUser || after["etc/group"] != oldGroup+"slurm-metrics:x:64032:\n" {
		t.Fatalf("an old jail after the script:\n%s\n%s", after["etc/passwd"], after["etc/group"])
	}

	// Run again on the result: nothing more is added.
	_, again := runMetricsUserScript(t, map[string]string{"etc/passwd": after["etc/passwd"], "etc/group": after["etc/group"], marker: ""})
	if again["etc/passwd"] != after["etc/passwd"] || again["etc/group"] != after["etc/group"] {
		t.Fatalf("a second run changed the jail:\n%s\n%s", again["etc/passwd"], again["etc/group"])
	}

	// Not populated (no marker): untouched.
	_, unpopulated := runMetricsUserScript(t, map[string]string{"etc/passwd": oldPasswd, "etc/group": oldGroup})
	if unpopulated["etc/passwd"] != oldPasswd || unpopulated["etc/group"] != oldGroup {
		t.Fatal("a jail without the populated marker was changed")
	}

	// The id is a site user's: untouched, and the log says so.
	taken := oldPasswd + "bob:x:64032:1000::/home/bob:/bin/bash\n"
	out, takenAfter := runMetricsUserScript(t, map[string]string{"etc/passwd": taken, "etc/group": oldGroup, marker: ""})
	if takenAfter["etc/passwd"] != taken || takenAfter["etc/group"] != oldGroup || !strings.Contains(out, "id 64032 is taken") {
		t.Fatalf("with the id taken: %q\n%s\n%s", out, takenAfter["etc/passwd"], takenAfter["etc/group"])
	}
}

// A jail whose /etc/passwd the script may not write (an NFS export with root_squash) does not
// fail the worker's start: the script says so, changes nothing, and the next line runs.
func TestMetricsUserScriptNeverFailsOnAJailItCannotWrite(t *testing.T) {
	jail := t.TempDir()
	if err := os.MkdirAll(filepath.Join(jail, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"etc/passwd": oldPasswd, "etc/group": oldGroup, slurmfacts.JailMarkerFile: ""} {
		if err := os.WriteFile(filepath.Join(jail, name), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	argv := []string{"/bin/sh", "-c", MetricsUserScript + "echo after-the-script"}
	if os.Geteuid() == 0 {
		// Root writes a 0444 file anyway: run as nobody, as root_squash makes root.
		for d := jail; d != filepath.Dir(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
			_ = os.Chmod(d, 0o755)
		}
		argv = append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "JAIL="+jail)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "after-the-script") || !strings.Contains(string(out), "not writable") {
		t.Fatalf("the script on a jail it cannot write: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(jail, "etc/passwd")); string(b) != oldPasswd {
		t.Fatalf("passwd changed:\n%s", b)
	}
}
