package jail_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/render/jail"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// These tests run the populate Job's script with the real /bin/sh on temporary folders.

func run(t *testing.T, source, jailDir, overwrite string) (string, error) {
	t.Helper()
	return runRequest(t, source, jailDir, overwrite, "demo-populate-jail-"+overwrite)
}

func runRequest(t *testing.T, source, jailDir, overwrite, request string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", jail.PopulateScript)
	cmd.Env = append(os.Environ(), "SOURCE="+source, "JAIL="+jailDir, "OVERWRITE="+overwrite, "REQUEST="+request, "MARKER="+slurmfacts.JailMarkerFile)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func setup(t *testing.T) (string, string) {
	t.Helper()
	src, dst := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "etc", "os-release"), []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	return src, dst
}

func TestAnEmptyJailIsPopulatedAndMarked(t *testing.T) {
	src, dst := setup(t)
	if out, err := run(t, src, dst, "false"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dst, "etc", "os-release")); err != nil {
		t.Fatal("root file system not copied")
	}
	if _, err := os.Stat(filepath.Join(dst, slurmfacts.JailMarkerFile)); err != nil {
		t.Fatal("marker not written")
	}
}

func TestAMarkedJailIsNeverRepopulatedWithoutOverwrite(t *testing.T) {
	src, dst := setup(t)
	if out, err := run(t, src, dst, "false"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	user := filepath.Join(dst, "root", "work.txt")
	_ = os.MkdirAll(filepath.Dir(user), 0o755)
	_ = os.WriteFile(user, []byte("a user's file"), 0o644)
	_ = os.WriteFile(filepath.Join(dst, "etc", "os-release"), []byte("changed by a user"), 0o644)
	out, err := run(t, src, dst, "false")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, "already populated") {
		t.Fatalf("unexpected output: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "etc", "os-release")); string(b) != "changed by a user" {
		t.Fatal("a populated jail was overwritten")
	}
}

func TestOverwriteRepopulatesAMarkedJail(t *testing.T) {
	src, dst := setup(t)
	if out, err := run(t, src, dst, "false"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	_ = os.WriteFile(filepath.Join(dst, "etc", "os-release"), []byte("old"), 0o644)
	if out, err := run(t, src, dst, "true"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "etc", "os-release")); string(b) != "v2" {
		t.Fatal("overwrite did not repopulate")
	}
}

func TestAJailWithDataButNoMarkerIsRefused(t *testing.T) {
	src, dst := setup(t)
	_ = os.WriteFile(filepath.Join(dst, "precious"), []byte("data"), 0o644)
	out, err := run(t, src, dst, "false")
	if err == nil {
		t.Fatalf("the script populated a jail that held data: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dst, "etc")); err == nil {
		t.Fatal("files were copied over existing data")
	}
}

func TestAnOverwriteRunsOncePerRequest(t *testing.T) {
	src, dst := setup(t)
	if out, err := run(t, src, dst, "false"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := runRequest(t, src, dst, "true", "req-a"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Users work in the jail after the overwrite.
	_ = os.WriteFile(filepath.Join(dst, "etc", "os-release"), []byte("installed later"), 0o644)
	// The Job of the same request runs again (deleted and recreated): nothing is lost.
	out, err := runRequest(t, src, dst, "true", "req-a")
	if err != nil || !strings.Contains(out, "already ran") {
		t.Fatalf("a repeated request ran again: %v %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "etc", "os-release")); string(b) != "installed later" {
		t.Fatal("a repeated overwrite request replaced the jail")
	}
	// A new request (another image) does overwrite.
	if out, err := runRequest(t, src, dst, "true", "req-b"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "etc", "os-release")); string(b) != "v2" {
		t.Fatal("a new overwrite request did not repopulate")
	}
}

// A container runtime makes mountpoint directories in a volume before the Job runs; a jail
// holding only empty directories is still empty.
func TestMountpointDirectoriesMadeByARuntimeDoNotCountAsData(t *testing.T) {
	src, dst := setup(t)
	for _, d := range []string{"etc/slurm", "var/spool/slurmd", "etc/ssh/slurm-operator/host-keys", "lost+found"} {
		if err := os.MkdirAll(filepath.Join(dst, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(t, src, dst, "false"); err != nil {
		t.Fatalf("refused a jail of empty directories: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dst, slurmfacts.JailMarkerFile)); err != nil {
		t.Fatal("marker not written")
	}
}

// One file deep in otherwise empty directories is data: the jail is refused.
func TestAFileDeepInEmptyDirectoriesIsData(t *testing.T) {
	src, dst := setup(t)
	deep := filepath.Join(dst, "home", "alice", "notes.txt")
	_ = os.MkdirAll(filepath.Dir(deep), 0o755)
	_ = os.WriteFile(deep, []byte("keep me"), 0o644)
	out, err := run(t, src, dst, "false")
	if err == nil {
		t.Fatalf("a jail holding %s was populated over: %s", deep, out)
	}
	if !strings.Contains(out, "home/alice/notes.txt") {
		t.Fatalf("the refusal does not name what it found: %s", out)
	}
	if b, _ := os.ReadFile(deep); string(b) != "keep me" {
		t.Fatal("the user's file changed")
	}
}

// overwrite: true replaces a jail this operator populated (it carries the marker), never one
// that someone else filled: a marker-less jail with data is refused either way.
func TestOverwriteNeverReplacesAJailWithDataButNoMarker(t *testing.T) {
	src, dst := setup(t)
	mine := filepath.Join(dst, "srv", "data.bin")
	_ = os.MkdirAll(filepath.Dir(mine), 0o755)
	_ = os.WriteFile(mine, []byte("not the operator's"), 0o644)
	out, err := run(t, src, dst, "true")
	if err == nil {
		t.Fatalf("a marker-less jail with data was overwritten: %s", out)
	}
	if b, _ := os.ReadFile(mine); string(b) != "not the operator's" {
		t.Fatal("the data changed")
	}
	if _, err := os.Stat(filepath.Join(dst, "etc", "os-release")); err == nil {
		t.Fatal("the image was copied over it")
	}
}

// rootSquashed runs the populate script as root in a user namespace whose root is nobody
// (65534) outside: the kernel then checks and owns root's writes as nobody's, which is what
// an NFS server exporting with root_squash does with a client's root.
func rootSquashed(t *testing.T, source, jailDir string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mapping root to nobody in a user namespace needs root")
	}
	cmd := exec.Command("/bin/sh", "-c", jail.PopulateScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		Credential:  &syscall.Credential{Uid: 0, Gid: 0},
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
	}
	cmd.Env = append(os.Environ(), "SOURCE="+source, "JAIL="+jailDir, "OVERWRITE=false", "REQUEST=squashed", "MARKER="+slurmfacts.JailMarkerFile)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestASquashedRootIsRefusedBeforeAnythingIsCopied(t *testing.T) {
	for name, owner := range map[string]int{"the export's root owned by root": 0, "the export's root owned by nobody": 65534} {
		t.Run(name, func(t *testing.T) {
			src, dst := setup(t)
			if err := os.Chmod(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dst, owner, owner); err != nil {
				t.Fatal(err)
			}
			// The source must be readable by nobody, as the image's files are.
			if err := os.Chmod(filepath.Dir(src), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := rootSquashed(t, src, dst)
			if err == nil || !strings.Contains(out, "no_root_squash") || !strings.Contains(out, "nothing was copied") {
				t.Fatalf("populate on a squashed root: %v\n%s\nwant a refusal naming no_root_squash", err, out)
			}
			left, _ := os.ReadDir(dst)
			if len(left) != 0 {
				t.Errorf("the refused populate left %d entries in the jail (%v): it must copy nothing", len(left), left[0].Name())
			}
		})
	}
}

func TestAProbeLeftByAStoppedJobIsNotData(t *testing.T) {
	src, dst := setup(t)
	if err := os.WriteFile(filepath.Join(dst, ".slurm-operator-root-probe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, src, dst, "false"); err != nil {
		t.Fatalf("a jail holding only the root probe of a stopped populate Job: %v\n%s\nwant it populated", err, out)
	}
	if _, err := os.Stat(filepath.Join(dst, "etc", "os-release")); err != nil {
		t.Error("root file system not copied")
	}
}
