package base

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

func TestDockerIsOffUnlessAskedFor(t *testing.T) {
	argv := []string{"/usr/sbin/sshd", "-D"}
	for name, enabled := range map[string]*bool{"unset": nil, "false": ptr.To(false)} {
		sc := &slurmv1alpha1.SlurmCluster{}
		sc.Spec.Docker.Enabled = enabled
		if sc.DockerEnabled() || DockerVolumes(sc) != nil || DockerRunMounts(sc) != nil || !slices.Equal(WithDockerSocket(sc, argv), argv) {
			t.Errorf("spec.docker.enabled %s: Docker adds volumes, mounts or the socket link", name)
		}
	}
}

func TestDockerWhenEnabled(t *testing.T) {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Spec.Docker.Enabled = ptr.To(true)
	sc.Spec.Docker.RegistryMirrors = []string{"https://mirror.example.com"}
	if len(DockerVolumes(sc)) != 2 || len(DockerRunMounts(sc)) != 1 {
		t.Fatal("Docker is not on when spec.docker.enabled is true")
	}
	// sh -c 'link; exec "$@"' NAME ARGV...: the program runs with its own arguments.
	got := WithDockerSocket(sc, []string{"/usr/sbin/sshd", "-D"})
	if len(got) != 6 || got[0] != "/bin/sh" || !strings.HasPrefix(got[2], DockerSocketLink) || !slices.Equal(got[4:], []string{"/usr/sbin/sshd", "-D"}) {
		t.Fatalf("WithDockerSocket = %q", got)
	}
	c := DockerdContainer(sc, "img", nil, []JailBind{{Source: "/a", Target: "/b"}})
	cmd := strings.Join(c.Command, " ")
	for _, want := range []string{"--bind /a:/b", "--bind " + dockerDataDir + ":/var/lib/docker", "--pivot --", "--registry-mirror=https://mirror.example.com"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("dockerd's command lacks %q: %s", want, cmd)
		}
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("dockerd is not privileged")
	}
}

func TestJailExecPivotGoesBeforeTheCommand(t *testing.T) {
	got := JailExecPivot([]JailBind{{Source: "/a", Target: "/b", ReadOnly: true}}, "/bin/sh", "-c", "--")
	want := []string{"/usr/local/bin/slurm-jail-exec", "--bind", "/a:/b:ro", "--pivot", "--", "/bin/sh", "-c", "--"}
	if !slices.Equal(got, want) {
		t.Fatalf("JailExecPivot = %q, want %q", got, want)
	}
}
