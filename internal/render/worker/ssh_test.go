package worker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// sshd runs in slurmd's container (pam_slurm_adopt needs slurmstepd to see its sessions' cgroup)
// with the PAM file of the worker image that the spec picks, and the admin groups it names.
func TestWorkerSSHDRunsWithSlurmdAndItsPAMFile(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_minimal")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		requireJob *bool
		groups     []string
		file       string
		noJobs     string
	}{
		{nil, nil, "sshd", "action_no_jobs=deny"},
		{ptr.To(true), []string{"hpc-admins", "ops"}, "sshd", "action_no_jobs=deny"},
		{ptr.To(false), nil, "sshd-open", "action_no_jobs=ignore"},
	} {
		sc := sc.DeepCopy()
		sc.Spec.SlurmNodes.Worker.SSH.RequireJob = tc.requireJob
		sc.Spec.SlurmNodes.Worker.SSH.AdminGroups = tc.groups
		sts, err := StatefulSet(fixtures.Input(sc), sc.WorkerSets()[0])
		if err != nil {
			t.Fatal(err)
		}
		cs := sts.Spec.Template.Spec.Containers
		if len(cs) != 1 || cs[0].Name != "slurmd" {
			t.Fatalf("containers: want slurmd alone (sshd runs in it), got %d", len(cs))
		}
		c := cs[0]
		bind := PAMDir + "/" + tc.file + ":/etc/pam.d/sshd:ro"
		if !slices.Contains(c.Command, bind) {
			t.Errorf("requireJob %v: the slurmd container does not bind %s: %q", tc.requireJob, bind, c.Command)
		}
		if !slices.Contains(c.Command, "/usr/sbin/sshd") || !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "ssh" && p.ContainerPort == 22 }) {
			t.Errorf("the slurmd container does not start sshd on port ssh (22): %q %v", c.Command, c.Ports)
		}
		if v, _ := envValue(c, "SSH_ADMIN_GROUPS"); v != strings.Join(tc.groups, " ") {
			t.Errorf("SSH_ADMIN_GROUPS %q, want %q", v, strings.Join(tc.groups, " "))
		}
		if v, _ := envValue(c, "SSHD_SCRIPT"); v != SSHDScript {
			t.Errorf("SSHD_SCRIPT is not SSHDScript: %q", v)
		}
		for _, m := range []corev1.VolumeMount{base.SSHHostKeysMount, base.AuthorizedKeysMount} {
			if !slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.Name == m.Name && v.MountPath == m.MountPath }) {
				t.Errorf("the slurmd container lacks sshd's mount %s", m.MountPath)
			}
		}
		// The file the pod binds is the image's, and says what the spec asks for.
		pam, err := os.ReadFile(filepath.Join(fixtures.RepoRoot(), "images", "worker", "pam", tc.file))
		if err != nil {
			t.Fatalf("the worker image has no %s: %v", tc.file, err)
		}
		var adopt, listfile string
		for _, l := range strings.Split(string(pam), "\n") {
			f := strings.Fields(l)
			if len(f) > 2 && f[2] == "pam_systemd.so" {
				t.Errorf("%s has pam_systemd, which would take sessions out of their jobs: %q", tc.file, l)
			}
			if len(f) > 2 && f[0] == "account" && f[2] == "pam_slurm_adopt.so" {
				adopt = l
			}
			if len(f) > 2 && f[0] == "account" && f[2] == "pam_listfile.so" {
				listfile = l
			}
		}
		// pam_slurm_adopt takes these values alone; any other is logged and replaced by its
		// default (action_no_jobs=allow would mean deny).
		accepted := map[string][]string{
			"action_no_jobs": {"deny", "ignore"}, "action_unknown": {"allow", "newest", "deny"},
			"action_adopt_failure": {"allow", "deny"}, "action_generic_failure": {"allow", "ignore", "deny"},
			"disable_x11": {"1"}, "join_container": {"false"},
		}
		for _, opt := range strings.Fields(adopt)[3:] {
			k, v, _ := strings.Cut(opt, "=")
			if !slices.Contains(accepted[k], v) {
				t.Errorf("%s: pam_slurm_adopt does not take %s (it takes %s=%v)", tc.file, opt, k, accepted[k])
			}
		}
		if !strings.Contains(adopt, tc.noJobs) || !strings.Contains(adopt, "action_adopt_failure=deny") {
			t.Errorf("%s: pam_slurm_adopt line %q, want %s and action_adopt_failure=deny", tc.file, adopt, tc.noJobs)
		}
		if !strings.Contains(listfile, "file="+AdminGroupsFile) || !strings.HasPrefix(strings.Fields(listfile)[1], "sufficient") {
			t.Errorf("%s: the admin groups are not let in by %s: %q", tc.file, AdminGroupsFile, listfile)
		}
	}
}

// No ssh session on a worker, root's included, may hold what the privileged container holds.
func TestWorkerSSHDCapabilitiesAreBounded(t *testing.T) {
	for _, c := range []string{"sys_admin", "sys_module", "sys_rawio", "net_admin", "sys_ptrace", "bpf", "perfmon", "sys_boot", "sys_time", "mac_admin", "dac_read_search", "linux_immutable", "sys_resource"} {
		if slices.Contains(SSHDCapabilities, c) {
			t.Errorf("%s is in the worker sshd's capabilities", c)
		}
	}
	if !strings.Contains(SSHDScript, "setpriv --bounding-set -all,+"+strings.Join(SSHDCapabilities, ",+")+" -- \"$@\"") {
		t.Errorf("SSHDScript does not bound sshd's capabilities:\n%s", SSHDScript)
	}
}
