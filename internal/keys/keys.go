// Package keys generates a cluster's secrets: the munge key, the JWT key, SSH host keys and
// database passwords. The controller calls it only when the Secret that holds a key does not
// exist yet; existing keys are never regenerated.
package keys

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

// SSHHost returns ed25519, ECDSA P-256 and RSA-3072 host keys as OpenSSH files, keyed by the
// file names sshd expects (ssh_host_<type>_key and ssh_host_<type>_key.pub).
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
	rsaKey, err := rsa.GenerateKey(rand.Reader, 3072)
	if err != nil {
		return nil, fmt.Errorf("rsa host key: %w", err)
	}
	for name, key := range map[string]any{"ed25519": edKey, "ecdsa": ecKey, "rsa": rsaKey} {
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
