package login_test

import (
	"strings"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/login"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/fuzzspec"
)

// Every key the API accepts is one line of root's authorized_keys, starting with its type: no
// accepted key adds a second key, or options (command=, from=) before the key.
func FuzzAuthorizedKeys(f *testing.F) {
	f.Add("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG user@host", "ssh-rsa AAAAB3Nza x")
	f.Add("ssh-ed25519 AAAA x\nssh-rsa AAAA evil", `command="sh" ssh-rsa AAAA`)
	f.Add("ssh-ed25519 AAAA x\rssh-rsa AAAA evil", "ssh-ed25519 AAAA \u2028ssh-rsa")
	specs := fuzzspec.New(f, "slurm_v1alpha1_slurmcluster")
	f.Fuzz(func(t *testing.T, a, b string) {
		sc, ok := specs.Accepted(t, func(s map[string]any) {
			fuzzspec.Sub(fuzzspec.Sub(s, "slurmNodes"), "login")["sshRootPublicKeys"] = []any{a, b}
		})
		if !ok {
			return
		}
		got := login.AuthorizedKeysConfigMap(base.Input{Cluster: sc}).Data["root"]
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != 2 || strings.ContainsRune(got, '\r') {
			t.Fatalf("2 keys made %d lines:\n%q", len(lines), got)
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "ssh-") && !strings.HasPrefix(l, "ecdsa-") && !strings.HasPrefix(l, "sk-") {
				t.Fatalf("a line that does not start with a key type: %q", l)
			}
		}
	})
}
