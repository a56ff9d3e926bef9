package slurmbundle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestUpstreamVersion(t *testing.T) {
	for in, want := range map[string]string{
		"24.11.5-4+deb13u1":   "24.11.5",
		"1:26.05.5-1":         "26.05.5",
		"26.05.5-1~bpo13+1":   "26.05.5",
		"25.05.0":             "25.05.0",
		"24.11.5-4+deb13u1~x": "24.11.5",
	} {
		if got := UpstreamVersion(in); got != want {
			t.Errorf("UpstreamVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestManifestRoundTripAndErrors(t *testing.T) {
	dir := t.TempDir()
	m := Manifest{Version: "24.11.5", Entries: []Entry{
		{Kind: Dir, Path: "/usr/lib/x86_64-linux-gnu/slurm-wlm"},
		{Kind: File, Path: "/usr/bin/srun"},
		{Kind: Link, Path: "/usr/sbin/slurmd", Target: "/usr/sbin/slurmd-wlm"},
		{Kind: Lib, Path: "libhwloc.so.15"},
	}}
	var sb strings.Builder
	if err := m.Write(&sb); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, ManifestFile), []byte(sb.String()), 0o644))
	must(os.WriteFile(filepath.Join(dir, VersionFile), []byte("24.11.5\n"), 0o644))
	got, err := Read(dir)
	must(err)
	if got.Version != m.Version || len(got.Entries) != len(m.Entries) {
		t.Fatalf("read back %+v, want %+v", got, m)
	}
	for i := range m.Entries {
		if got.Entries[i] != m.Entries[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got.Entries[i], m.Entries[i])
		}
	}
	for line, want := range map[string]string{
		"file usr/bin/srun":       "not a clean absolute path",
		"dir /":                   "not a clean absolute path",
		"file /usr/../etc/shadow": "not a clean absolute path",
		"lib ../libx.so":          "not a soname",
		"link /usr/sbin/slurmd":   "want 3 fields",
		"socket /run/x":           "unknown kind",
	} {
		must(os.WriteFile(filepath.Join(dir, ManifestFile), []byte(line+"\n"), 0o644))
		if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", line, err, want)
		}
	}
}

// TestMakeFromDebiansSlurm bundles the real Debian Slurm of SLURM_ROOTFS.
func TestMakeFromDebiansSlurm(t *testing.T) {
	rootfs := os.Getenv("SLURM_ROOTFS")
	if rootfs == "" {
		t.Skip("needs SLURM_ROOTFS (make test sets it)")
	}
	out := filepath.Join(t.TempDir(), "bundle")
	m, err := Make(rootfs, out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Version, "24.11.") {
		t.Errorf("version %q", m.Version)
	}
	has := map[Entry]bool{}
	for _, e := range m.Entries {
		has[e] = true
		if e.Kind != Lib && (strings.HasPrefix(e.Path, "/etc/") || strings.HasPrefix(e.Path, "/usr/share/doc/")) {
			t.Errorf("bundled %s", e.Path)
		}
		if e.Kind == Lib && (e.Path == "libc.so.6" || e.Path == "libslurmfull.so") {
			t.Errorf("bundled %s as a library the jail may lack", e.Path)
		}
	}
	for _, want := range []Entry{
		{Kind: Dir, Path: "/usr/lib/x86_64-linux-gnu/slurm-wlm"},
		{Kind: File, Path: "/usr/sbin/slurmd-wlm"},
		{Kind: File, Path: "/usr/bin/srun"},
		{Kind: Link, Path: "/usr/sbin/slurmd", Target: "/usr/sbin/slurmd-wlm"},
		{Kind: Lib, Path: "libhwloc.so.15"},
		{Kind: Lib, Path: "libmunge.so.2"},
	} {
		if !has[want] {
			t.Errorf("the bundle lacks %+v", want)
		}
	}
	back, err := Read(out)
	if err != nil || len(back.Entries) != len(m.Entries) {
		t.Fatalf("read back: %d entries, %v", len(back.Entries), err)
	}
	if fi, err := os.Stat(filepath.Join(out, RootDir, "usr/lib/x86_64-linux-gnu/slurm-wlm/auth_munge.so")); err != nil || fi.Size() == 0 {
		t.Errorf("auth_munge.so in the bundle: %v", err)
	}
	// Extra files (SSSD's client side in the worker image) are bundled as extras, shown only
	// where asked for, with what they need; a missing one fails the build.
	ex, err := Make(rootfs, filepath.Join(t.TempDir(), "extra"), "/usr/bin/ssh-keygen")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ex.Entries, Entry{Kind: Extra, Path: "/usr/bin/ssh-keygen"}) {
		t.Error("the extra file is not in the bundle")
	}
	if _, err := Make(rootfs, filepath.Join(t.TempDir(), "missing"), "/usr/bin/no-such-program"); err == nil {
		t.Error("a missing extra file made a bundle")
	}
	if _, err := Make(t.TempDir(), filepath.Join(t.TempDir(), "b")); err == nil {
		t.Error("a root without dpkg's status made a bundle")
	}
}
