package keys

import (
	"bytes"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestSSHHostKeysParseAndMatchTheirPublicHalves(t *testing.T) {
	files, err := SSHHost()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("want the ed25519 and ECDSA keys and their public halves, got %d files", len(files))
	}
	for _, typ := range []string{"ed25519", "ecdsa"} {
		priv, pub := files["ssh_host_"+typ+"_key"], files["ssh_host_"+typ+"_key.pub"]
		signer, err := ssh.ParsePrivateKey(priv)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if !bytes.Equal(ssh.MarshalAuthorizedKey(signer.PublicKey()), pub) {
			t.Fatalf("%s: public key does not match", typ)
		}
	}
}

func TestKeysAreRandomAndSized(t *testing.T) {
	a, _ := Munge()
	b, _ := Munge()
	if len(a) != 1024 || bytes.Equal(a, b) {
		t.Fatal("munge keys must be 1024 random bytes")
	}
	if j, _ := JWT(); len(j) != 32 {
		t.Fatal("JWT key must be 32 bytes")
	}
}
