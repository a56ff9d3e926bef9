// Package keys generates a cluster's secrets: the munge key, the JWT key, SSH host keys and
// database passwords. The controller calls it only when the Secret that holds a key does not
// exist yet; existing keys are never regenerated.
package keys

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// Munge returns a new 1024-byte munge key.
func Munge() ([]byte, error) { return random(1024) }

// JWT returns a new 32-byte HS256 key.
func JWT() ([]byte, error) { return random(32) }

// Password returns a new random password of 32 URL-safe characters.
func Password() ([]byte, error) {
	b, err := random(24)
	if err != nil {
		return nil, err
	}
	return []byte(base64.RawURLEncoding.EncodeToString(b)), nil
}

// SSHHost returns ed25519 and ECDSA P-256 host keys as OpenSSH files, keyed by the file names
// sshd expects (ssh_host_<type>_key and ssh_host_<type>_key.pub). No RSA key: generating an
// RSA-3072 key takes about a third of a second of CPU, which made creating many clusters at
// once wait on it, and every SSH client of the last decade accepts an ECDSA or ed25519 host
// key (docs/security.md says which do not). A cluster whose Secret already holds an RSA key
// keeps it, and sshd keeps offering it.
func SSHHost() (map[string][]byte, error) {
	out := map[string][]byte{}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ed25519 host key: %w", err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ecdsa host key: %w", err)
	}
	for name, key := range map[string]any{"ed25519": edKey, "ecdsa": ecKey} {
		block, err := ssh.MarshalPrivateKey(key, "")
		if err != nil {
			return nil, fmt.Errorf("%s host key: %w", name, err)
		}
		signer, err := ssh.NewSignerFromKey(key)
		if err != nil {
			return nil, fmt.Errorf("%s host key: %w", name, err)
		}
		out["ssh_host_"+name+"_key"] = pem.EncodeToMemory(block)
		out["ssh_host_"+name+"_key.pub"] = ssh.MarshalAuthorizedKey(signer.PublicKey())
	}
	return out, nil
}

func random(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("read random bytes: %w", err)
	}
	return b, nil
}
