package slurm_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/keys"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	renderlogin "github.com/slurm-k8s/slurm-operator/internal/render/login"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// userKey is an SSH key pair a user logs in with.
type userKey struct {
	private []byte
	public  string
}

func newUserKey(t *testing.T, comment string) userKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + comment
	return userKey{private: pem.EncodeToMemory(block), public: pub}
}

// writeFile writes data to path on a host (mode given as an octal string).
func writeFile(t *testing.T, ctx context.Context, c *slurmharness.Cluster, host, path, mode string, data []byte) {
	t.Helper()
	script := `mkdir -p "$(dirname "$1")" && printf '%s' "$3" > "$1.new" && chmod "$2" "$1.new" && mv "$1.new" "$1"`
	if _, err := c.Exec(ctx, host, "sh", "-c", script, "sh", path, mode, string(data)); err != nil {
		t.Fatalf("write %s on %s: %v", path, host, err)
	}
}

// TestLoginNodesTakeKeysOnlyAndNewKeysWithoutARestart runs the real sshd with the arguments,
// host keys and authorized keys the operator renders for login nodes.
func TestLoginNodesTakeKeysOnlyAndNewKeysWithoutARestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice, bob := newUserKey(t, "alice@laptop"), newUserKey(t, "bob@desk")
	sc := spec(t, 1)
	sc.Spec.SlurmNodes.Login.SSHRootPublicKeys = []slurmv1alpha1.SSHPublicKey{slurmv1alpha1.SSHPublicKey(alice.public)}
	r := render(t, sc)
	hostKeys, err := keys.SSHHost()
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, ctx, r, 1)

	// What the login pod mounts: the host keys Secret and the authorized keys ConfigMap.
	for name, data := range hostKeys {
		writeFile(t, ctx, c, loginHost, base.SSHHostKeysDir+"/"+name, "0400", data)
	}
	authorized := func(in []slurmv1alpha1.SSHPublicKey) {
		sc.Spec.SlurmNodes.Login.SSHRootPublicKeys = in
		cm := renderlogin.AuthorizedKeysConfigMap(render(t, sc).in)
		writeFile(t, ctx, c, loginHost, base.AuthorizedKeysDir+"/root", "0444", []byte(cm.Data["root"]))
	}
	authorized(sc.Spec.SlurmNodes.Login.SSHRootPublicKeys)
	if _, err := c.Exec(ctx, loginHost, "mkdir", "-p", "/run/sshd"); err != nil {
		t.Fatal(err)
	}
	args := base.SSHDArgs(r.in.Cluster.Spec.SlurmNodes.Login.Sshd.Port)
	if out, err := c.Exec(ctx, loginHost, append(args, "-t")...); err != nil {
		t.Fatalf("sshd rejects the rendered arguments: %v %s", err, out)
	}
	if err := c.StartDaemon(loginHost, "sshd", args...); err != nil {
		t.Fatal(err)
	}
	sshdPID := c.PID(loginHost, "sshd")

	client := workerHost(0).Name
	writeFile(t, ctx, c, client, "/root/.ssh/alice", "0600", alice.private)
	writeFile(t, ctx, c, client, "/root/.ssh/bob", "0600", bob.private)
	sshAs := func(key string, extra ...string) (string, error) {
		a := []string{"ssh", "-i", "/root/.ssh/" + key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
			"-o", "UserKnownHostsFile=/root/.ssh/known_hosts", "-o", "ConnectTimeout=5"}
		a = append(a, extra...)
		return c.Exec(ctx, client, append(a, "root@"+loginHost, "hostname")...)
	}
	if err := c.WaitFor(ctx, "sshd answers", func() (bool, error) {
		_, err := sshAs("alice")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.Logs(loginHost))
	}

	t.Run("a key from sshRootPublicKeys logs in as root", func(t *testing.T) {
		out, err := sshAs("alice")
		if err != nil || strings.TrimSpace(out) != loginHost {
			t.Fatalf("ssh as alice: %q, %v", out, err)
		}
	})

	t.Run("the host key is the one from the operator's Secret", func(t *testing.T) {
		out, err := c.Exec(ctx, client, "ssh-keyscan", "-t", "ed25519", loginHost)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Fields(string(hostKeys["ssh_host_ed25519_key.pub"]))[1]
		if !strings.Contains(out, want) {
			t.Fatalf("ssh-keyscan printed %q, want the key %s", out, want)
		}
	})

	t.Run("other keys and passwords are refused", func(t *testing.T) {
		if out, err := sshAs("bob"); err == nil {
			t.Fatalf("bob logged in before his key was added: %s", out)
		}
		// BatchMode never types a password, so a refused login alone proves nothing: ask the
		// server which methods it offers (ssh -v prints them) and require publickey alone.
		out, err := c.Exec(ctx, client, "sh", "-c", "ssh -v -o BatchMode=yes -o StrictHostKeyChecking=no "+
			"-o PreferredAuthentications=password,keyboard-interactive -o PubkeyAuthentication=no root@"+loginHost+" true 2>&1; echo rc=$?")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "\nrc=0") {
			t.Fatalf("a login without a key was accepted:\n%s", out)
		}
		offered := 0
		for _, l := range strings.Split(out, "\n") {
			if _, methods, ok := strings.Cut(l, "Authentications that can continue: "); ok {
				offered++
				if strings.TrimSpace(methods) != "publickey" {
					t.Fatalf("sshd offers %q, want publickey alone", methods)
				}
			}
		}
		if offered == 0 {
			t.Fatalf("ssh -v did not say which methods sshd offers:\n%s", out)
		}
	})

	t.Run("adding a key lets it in without restarting sshd", func(t *testing.T) {
		authorized([]slurmv1alpha1.SSHPublicKey{slurmv1alpha1.SSHPublicKey(alice.public), slurmv1alpha1.SSHPublicKey(bob.public)})
		out, err := sshAs("bob")
		if err != nil || strings.TrimSpace(out) != loginHost {
			t.Fatalf("ssh as bob after adding his key: %q, %v", out, err)
		}
		if pid := c.PID(loginHost, "sshd"); pid != sshdPID {
			t.Fatalf("sshd was restarted: %d → %d", sshdPID, pid)
		}
	})
}
