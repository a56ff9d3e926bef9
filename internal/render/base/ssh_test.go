package base

import (
	"strings"
	"testing"
)

// sshd's arguments never depend on which keys the Secret holds (a pod template must not change
// with it), and a Secret with none of the known keys is refused.
func TestSSHDIsGivenTheFixedHostKeyListAndASecretWithNoKnownKeyIsRefused(t *testing.T) {
	var hostKeys []string
	for _, a := range SSHDArgs(22) {
		if strings.HasPrefix(a, "HostKey=") {
			hostKeys = append(hostKeys, strings.TrimPrefix(a, "HostKey="+SSHHostKeysDir+"/"))
		}
	}
	if strings.Join(hostKeys, " ") != "ssh_host_ed25519_key ssh_host_ecdsa_key ssh_host_rsa_key" {
		t.Errorf("HostKey %q", hostKeys)
	}
	if err := CheckHostKeys(map[string][]byte{"ssh_host_ecdsa_key": []byte("k")}); err != nil {
		t.Errorf("an ECDSA key alone is enough: %v", err)
	}
	if err := CheckHostKeys(map[string][]byte{"id_rsa": []byte("k")}); err == nil {
		t.Error("a Secret with no known host key was accepted")
	}
}
