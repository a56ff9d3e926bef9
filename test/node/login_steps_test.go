package node

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/syncbuf"
)

// The login nodes' steps of the one-node test: root's keys changed live, and a login pod that
// stops with sessions open.

// checkRootKeyPatch: a root key added with kubectl patch lets root in at once without a restart,
// and open sessions go on.
func (e *env) checkRootKeyPatch() {
	t := e.t
	before := e.podsSnapshot()
	// An ssh session opened before the change, waiting for a line on its stdin.
	session := exec.Command("ssh", sshArgs(e.key, "root@"+e.login, "read line; echo still-here-$line")...)
	in, err := session.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var sessionOut bytes.Buffer
	session.Stdout, session.Stderr = &sessionOut, &sessionOut
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "second")
	pub := writeKey(t, second)
	start := time.Now()
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json",
		"-p", fmt.Sprintf(`[{"op":"add","path":"/spec/slurmNodes/login/sshRootPublicKeys/-","value":%q}]`, pub))
	// The operator nudges the login pods, so their kubelet syncs the keys at once rather
	// than within its sync period. Both login nodes must take it (the Service picks one).
	for _, node := range []string{"login-0", "login-1"} {
		// Within 20 s: without the nudge it would take the kubelet's sync, about a minute.
		e.waitFor(20*time.Second, "the second key lets root in on "+node, func() (bool, string) {
			out, err := e.run(t.Context(), "", "ssh", "-F", e.sshConfig, "-J", "root@"+e.login, "-i", second, "root@"+node, "id -un")
			return err == nil && strings.TrimSpace(out) == "root", out
		})
	}
	t.Logf("a new root key works on both login nodes %.1fs after kubectl patch", time.Since(start).Seconds())
	if after := e.podsSnapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("pods were replaced or restarted:\n%v\nthen\n%v", before, after)
	}
	_, _ = io.WriteString(in, "yes\n")
	_ = in.Close()
	if err := session.Wait(); err != nil || !strings.Contains(sessionOut.String(), "still-here-yes") {
		t.Errorf("the open session did not survive: %v %s", err, sessionOut.String())
	}
}

// checkLoginStopNotice: a login pod that stops tells its ssh sessions, keeps them through the
// notice, and stops once the last one ended.
func (e *env) checkLoginStopNotice() {
	t := e.t
	pod := cluster + "-login-1"
	// A session with a terminal on login-1 (reached through the login Service).
	session := exec.Command("ssh", "-tt", "-F", e.sshConfig, "-J", "root@"+e.login, "root@login-1", "echo session-up-on-$(hostname); sleep 600")
	var out syncbuf.Buffer
	session.Stdout, session.Stderr = &out, &out
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- session.Wait() }()
	defer func() { _ = session.Process.Kill() }()
	// Its shell runs on login-1 (the jump's own connection may land there first).
	e.waitFor(30*time.Second, "the session on login-1", func() (bool, string) {
		return strings.Contains(out.String(), "session-up-on-"+pod), out.String()
	})
	uid := e.kubectlOK("get", "pod", "-n", ns, pod, "-o", "jsonpath={.metadata.uid}")
	deleted := time.Now()
	e.kubectlOK("delete", "pod", "-n", ns, pod, "--wait=false")
	e.waitFor(30*time.Second, "the notice on the session's terminal", func() (bool, string) {
		return strings.Contains(out.String(), "stops in 60 seconds"), out.String()
	})
	t.Logf("the session was told %.1fs after kubectl delete: %q", time.Since(deleted).Seconds(), strings.TrimSpace(out.String()))
	oldPod := func() bool {
		got, err := e.kubectl("get", "pod", "-n", ns, pod, "-o", "jsonpath={.metadata.uid}")
		return err == nil && strings.TrimSpace(got) == uid
	}
	// 10 s on, the pod still waits for its session, which still runs.
	time.Sleep(10 * time.Second)
	select {
	case err := <-ended:
		t.Fatalf("the session ended during the notice (%v):\n%s", err, out.String())
	default:
	}
	if !oldPod() {
		t.Fatalf("the pod stopped during the notice with a session open:\n%s", out.String())
	}
	// The user logs out: the pod stops at once, long before the 60 s are up.
	_ = session.Process.Kill()
	<-ended
	loggedOut := time.Now()
	e.waitFor(25*time.Second, "the old login-1 pod gone after its last session ended", func() (bool, string) {
		return !oldPod(), ""
	})
	t.Logf("the old pod was gone %.1fs after the last session ended (%.0fs after kubectl delete)", time.Since(loggedOut).Seconds(), time.Since(deleted).Seconds())
	e.waitFor(2*time.Minute, "login-1 back", func() (bool, string) {
		o, err := e.sshJump("login-1", "true")
		return err == nil, o
	})
}
