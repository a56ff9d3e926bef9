package base

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// spec.identity's switches each add or leave out their own piece, and without spec.identity
// nothing of SSSD reaches a pod.
func TestIdentityPiecesFollowTheirSwitches(t *testing.T) {
	targets := func(binds []JailBind) []string {
		var out []string
		for _, b := range binds {
			out = append(out, b.Target)
		}
		return out
	}
	keysCommand := func(sc *slurmv1alpha1.SlurmCluster) string {
		for _, a := range SSHDArgsWithIdentity(sc, 22) {
			if strings.HasPrefix(a, "AuthorizedKeysCommand=") {
				return a
			}
		}
		return ""
	}

	none := &slurmv1alpha1.SlurmCluster{}
	if IdentityVolumes(none) != nil || IdentityMounts(none) != nil || IdentityBinds(none, true) != nil ||
		ControllerIdentityMounts(none) != nil || len(WithSSSDSidecar(none, "img", nil)) != 0 {
		t.Error("a cluster without spec.identity got a piece of SSSD")
	}
	if got := keysCommand(none); got != "AuthorizedKeysCommand=/usr/bin/cat "+AuthorizedKeysDir+"/%u" {
		t.Errorf("without spec.identity: %s", got)
	}

	on := &slurmv1alpha1.SlurmCluster{Spec: slurmv1alpha1.SlurmClusterSpec{Identity: &slurmv1alpha1.Identity{
		SSSD: slurmv1alpha1.SSSD{ConfigSecretName: "sssd-config"}}}}
	login, worker := targets(IdentityBinds(on, true)), targets(IdentityBinds(on, false))
	for _, want := range []string{SSSDPipesDir, SSSDCacheDir, "/etc/nsswitch.conf", AuthorizedKeysCommandPath} {
		if !slices.Contains(login, want) || !slices.Contains(worker, want) {
			t.Errorf("defaults: %s missing from login %q or worker %q", want, login, worker)
		}
	}
	if !slices.Contains(login, "/etc/pam.d/sshd") || slices.Contains(worker, "/etc/pam.d/sshd") {
		t.Errorf("the directory's PAM goes on login nodes alone (workers keep pam_slurm_adopt): login %q worker %q", login, worker)
	}
	if pam := IdentityFiles(on)[IdentityLoginPAMKey]; !strings.Contains(pam, "pam_mkhomedir.so") || !strings.Contains(pam, "pam_sss.so") {
		t.Errorf("the login PAM with the defaults:\n%s", pam)
	}
	hash := WithSSSDConfigHash(Input{Cluster: on, Keys: Keys{SSSDConfigHash: "s1"}}, nil)[AnnotationSSSDConfigHash]
	if other := WithSSSDConfigHash(Input{Cluster: on, Keys: Keys{SSSDConfigHash: "s2"}}, nil)[AnnotationSSSDConfigHash]; hash == "" || other == hash {
		t.Errorf("a changed Secret must change the pods' hash: %q, %q", hash, other)
	}
	if got := keysCommand(on); got != "AuthorizedKeysCommand="+AuthorizedKeysCommandPath+" %u" {
		t.Errorf("with sshKeys: %s", got)
	}
	if got := keysCommand(none); got != "AuthorizedKeysCommand=/usr/bin/cat "+AuthorizedKeysDir+"/%u" {
		t.Errorf("SSHDArgsWithIdentity changed the shared arguments: %s", got)
	}
	if s := WithSSSDSidecar(on, "img", nil); len(s) != 1 || s[0].Image != "img" || !strings.Contains(s[0].Command[2], "sssd -i") {
		t.Errorf("the sidecar: %+v", s)
	}

	on.Spec.Identity.SSSD.SSHKeys = ptr.To(false)
	on.Spec.Identity.SSSD.CreateHomeDirectories = ptr.To(false)
	login = targets(IdentityBinds(on, true))
	if slices.Contains(login, AuthorizedKeysCommandPath) || !slices.Contains(login, "/etc/pam.d/sshd") {
		t.Errorf("sshKeys and createHomeDirectories off: %q", login)
	}
	if pam := IdentityFiles(on)[IdentityLoginPAMKey]; strings.Contains(pam, "pam_mkhomedir.so") || !strings.Contains(pam, "pam_sss.so") {
		t.Errorf("the login PAM without createHomeDirectories:\n%s", pam)
	}
	// The login PAM changed with the switch: so does the pods' hash.
	if WithSSSDConfigHash(Input{Cluster: on, Keys: Keys{SSSDConfigHash: "s1"}}, nil)[AnnotationSSSDConfigHash] == hash {
		t.Error("a changed identity file must change the pods' hash")
	}
	if got := keysCommand(on); !strings.Contains(got, "/usr/bin/cat") {
		t.Errorf("sshKeys off: %s", got)
	}
}
