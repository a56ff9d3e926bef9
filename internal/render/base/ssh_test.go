package base

import (
	"slices"
	"testing"
)

// sshd is given the host keys the cluster's Secret holds, and only those: a cluster made
// before RSA keys were dropped keeps offering its RSA key, a new one does not name a file
// that does not exist.
func TestSSHDIsGivenTheHostKeysTheSecretHolds(t *testing.T) {
	hostKeyArgs := func(keys map[string][]byte) []string {
		var out []string
		for _, a := range SSHDArgs(22, keys) {
			if len(a) > len("HostKey=") && a[:len("HostKey=")] == "HostKey=" {
				out = append(out, a[len("HostKey="+SSHHostKeysDir+"/"):])
			}
		}
		return out
	}
	key := []byte("k")
	newCluster := map[string][]byte{"ssh_host_ed25519_key": key, "ssh_host_ed25519_key.pub": key, "ssh_host_ecdsa_key": key, "ssh_host_ecdsa_key.pub": key}
	if got, want := hostKeyArgs(newCluster), []string{"ssh_host_ed25519_key", "ssh_host_ecdsa_key"}; !slices.Equal(got, want) {
		t.Errorf("new cluster: HostKey %q, want %q", got, want)
	}
	older := map[string][]byte{"ssh_host_rsa_key": key}
	for k, v := range newCluster {
		older[k] = v
	}
	if got, want := hostKeyArgs(older), []string{"ssh_host_ed25519_key", "ssh_host_ecdsa_key", "ssh_host_rsa_key"}; !slices.Equal(got, want) {
		t.Errorf("cluster with an RSA key: HostKey %q, want %q", got, want)
	}
}
