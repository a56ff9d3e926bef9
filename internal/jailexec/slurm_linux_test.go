package jailexec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/slurmbundle"
)

// TestTheImagesSlurmRunsInTheJail bundles the real Debian Slurm of SLURM_ROOTFS as the worker
// image does and starts the entrypoint with it on two jails made from that root file system:
// one populated by an earlier release (its own Slurm packages, here with a slurmd of another
// build and a stray plugin) and one without any Slurm nor two of the libraries Slurm needs. In
// both the commands, slurmd and its plugins are the image's, the libraries resolve, and the shared
// jail got only mountpoints and links.
func TestTheImagesSlurmRunsInTheJail(t *testing.T) {
	rootfs := os.Getenv("SLURM_ROOTFS")
	if os.Geteuid() != 0 || rootfs == "" {
		t.Skip("needs root and SLURM_ROOTFS (make test sets it)")
	}
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	m, err := slurmbundle.Make(rootfs, bundleDir)
	must(t, err)
	const plugins = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
	config := filepath.Join(t.TempDir(), "slurm")
	must(t, os.MkdirAll(config, 0o755))
	must(t, os.WriteFile(filepath.Join(config, "slurm.conf"), []byte("ClusterName=jailtest\nSlurmctldHost=localhost\n"), 0o644))
	check := `
x="$BIN --jail $JAIL --slurm-bundle ` + bundleDir + ` --bind ` + config + `:/etc/slurm:ro"
$x -- /bin/true
$x -- /bin/sh -c '
  echo "slurmd: $(slurmd -V)"
  echo "srun: $(srun --version)"
  echo "sinfo: $(sinfo --version)"
  echo "stray plugin: $(ls ` + plugins + `/stale_plugin.so 2>&1 | grep -c "No such")"
  echo "unresolved: $(for f in /usr/sbin/slurmd /usr/sbin/slurmstepd /usr/bin/srun ` + plugins + `/*.so; do ldd $f; done | grep -c "not found")"
  echo "hwloc: $(ldd /usr/sbin/slurmd | grep -o "libhwloc.so.15 => [^ ]*")"
  echo "hwloc file: $(readlink -f /usr/lib/x86_64-linux-gnu/libhwloc.so.15)"
'
`
	version := "slurm-wlm " + m.Version
	t.Run("an earlier release's jail", func(t *testing.T) {
		dir, bin, jail, mountJail := overlayJail(t, rootfs)
		script := mountJail + `
mount -t tmpfs tmpfs /run
printf '#!/bin/sh\necho the jail own slurmd\n' > $JAIL/usr/sbin/slurmd-wlm
echo stale > $JAIL` + plugins + `/stale_plugin.so
` + check
		got := runInNamespace(t, script, bin, jail)
		for _, want := range []string{"slurmd: " + version, "srun: " + version, "sinfo: " + version,
			"stray plugin: 1", "unresolved: 0\n", "hwloc: libhwloc.so.15 => /lib/x86_64-linux-gnu/libhwloc.so.15",
			"hwloc file: /usr/lib/x86_64-linux-gnu/libhwloc.so.15."} {
			if !strings.Contains(got, want) {
				t.Errorf("want %q in:\n%s", want, got)
			}
		}
		// The jail's own files stay as they were: nothing of the image's was copied into them.
		if b, err := os.ReadFile(filepath.Join(dir, "upper/usr/sbin/slurmd-wlm")); err != nil || !strings.Contains(string(b), "the jail own slurmd") {
			t.Errorf("the jail's own slurmd-wlm was changed: %q, %v", b, err)
		}
	})
	t.Run("a jail without Slurm", func(t *testing.T) {
		dir, bin, jail, mountJail := overlayJail(t, rootfs)
		var rm []string
		for _, e := range m.Entries {
			if e.Kind != slurmbundle.Lib {
				rm = append(rm, "$JAIL"+e.Path)
			}
		}
		rm = append(rm, "$JAIL/usr/lib/x86_64-linux-gnu/libhwloc.so.15*", "$JAIL/usr/lib/x86_64-linux-gnu/libmunge.so.2*")
		script := mountJail + `
mount -t tmpfs tmpfs /run
rm -rf ` + strings.Join(rm, " ") + `
test ! -e $JAIL/usr/bin/srun && test ! -e $JAIL` + plugins + ` && echo "no Slurm in the jail"
` + check
		got := runInNamespace(t, script, bin, jail)
		for _, want := range []string{"no Slurm in the jail", "slurmd: " + version, "srun: " + version, "sinfo: " + version,
			"unresolved: 0\n", "hwloc: libhwloc.so.15 => /lib/x86_64-linux-gnu/libhwloc.so.15",
			"hwloc file: " + slurmbundle.RunLibDir + "/libhwloc.so.15\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("want %q in:\n%s", want, got)
			}
		}
		upper := filepath.Join(dir, "upper")
		for so, want := range map[string]string{"libhwloc.so.15": slurmbundle.RunLibDir + "/libhwloc.so.15", "libmunge.so.2": slurmbundle.RunLibDir + "/libmunge.so.2"} {
			if link, err := os.Readlink(filepath.Join(upper, JailLibDir, so)); err != nil || link != want {
				t.Errorf("%s in the jail: %q, %v; want a link to %s", so, link, err, want)
			}
		}
		// A library the jail has is its own: no link made over it.
		if fi, err := os.Lstat(filepath.Join(upper, JailLibDir, "liblz4.so.1")); err == nil {
			t.Errorf("liblz4.so.1 was touched in the jail: %v", fi.Mode())
		}
		if fi, err := os.Stat(filepath.Join(upper, "usr/sbin/slurmd-wlm")); err != nil || fi.Size() != 0 {
			t.Errorf("slurmd-wlm in the shared jail should be an empty mountpoint: %v, %v", fi, err)
		}
		if link, err := os.Readlink(filepath.Join(upper, "usr/sbin/slurmd")); err != nil || link != "/usr/sbin/slurmd-wlm" {
			t.Errorf("the slurmd command link in the jail: %q, %v", link, err)
		}
	})
}

// The bundle's extra files (SSSD's client side in the worker image) are shown only in pods that
// ask for them (--sssd-client): elsewhere the jail's own file of that path stays as it is.
func TestTheBundlesExtrasAreShownOnlyWhenAskedFor(t *testing.T) {
	rootfs := os.Getenv("SLURM_ROOTFS")
	if os.Geteuid() != 0 || rootfs == "" {
		t.Skip("needs root and SLURM_ROOTFS (make test sets it)")
	}
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	_, err := slurmbundle.Make(rootfs, bundleDir, "/usr/bin/ssh-keyscan")
	must(t, err)
	dir, bin, jail, mountJail := overlayJail(t, rootfs)
	// Each pod sets its jail up once: one namespace per pod.
	run := func(flags, check string) string {
		return runInNamespace(t, mountJail+`
mount -t tmpfs tmpfs /run
rm -f $JAIL/usr/bin/ssh-keyscan
$BIN --jail $JAIL --slurm-bundle `+bundleDir+` `+flags+` -- /bin/sh -c '`+check+`'
`, bin, jail)
	}
	if got := run("", `test -e /usr/bin/ssh-keyscan && echo shown || echo absent`); !strings.Contains(got, "absent\n") {
		t.Errorf("without --sssd-client, the extra was shown:\n%s", got)
	}
	if got := run("--sssd-client", `test -s /usr/bin/ssh-keyscan && echo shown || echo absent`); !strings.Contains(got, "shown\n") {
		t.Errorf("with --sssd-client, the extra was not shown:\n%s", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "upper/usr/bin/ssh-keyscan")); err != nil || fi.Size() != 0 {
		t.Errorf("ssh-keyscan in the shared jail should be an empty mountpoint after a pod that asked: %v, %v", fi, err)
	}
}

func runInNamespace(t *testing.T, script, bin, jail string) string {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "BIN="+bin, "JAIL="+jail)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	return string(out)
}
