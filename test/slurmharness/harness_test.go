package slurmharness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	ctrlHost  = "demo-controller-0"
	loginHost = "demo-login-0"
	acctHost  = "demo-accounting-0"
)

// HoldEnv names a duration (e.g. "10m"): when the cluster test fails, it waits that long
// before tearing the cluster down, so that one can look inside with <cluster dir>/enter.
const HoldEnv = "SLURMHARNESS_HOLD"

func rootFSOrSkip(t *testing.T) string {
	t.Helper()
	r := os.Getenv("SLURM_ROOTFS")
	if r == "" {
		t.Skip("SLURM_ROOTFS is empty: run as root with SLURM_ROOTFS=$(hack/slurm-rootfs.sh) to start a real Slurm cluster")
	}
	if os.Geteuid() != 0 {
		t.Fatal("SLURM_ROOTFS is set but the test does not run as root: the harness needs namespaces, mounts and cgroups")
	}
	return r
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func testConfig(t *testing.T, rootFS string) Config {
	return Config{
		RootFS: rootFS,
		SlurmFiles: map[string][]byte{
			"slurm.conf":  readTestdata(t, "slurm.conf"),
			"gres.conf":   readTestdata(t, "gres.conf"),
			"cgroup.conf": readTestdata(t, "cgroup.conf"),
		},
		MungeKey:   randomBytes(t, 1024),
		Controller: Host{Name: ctrlHost, Aliases: []string{"demo-controller"}},
		Workers: []Host{
			{Name: "demo-worker-0", SlurmName: "worker-0", GPUs: 2},
			{Name: "demo-worker-1", SlurmName: "worker-1", GPUs: 2},
		},
		Logins:       []Host{{Name: loginHost, Aliases: []string{"demo-login"}}},
		Accounting:   &Host{Name: acctHost, Aliases: []string{"demo-accounting"}},
		SlurmdbdConf: readTestdata(t, "slurmdbd.conf"),
		DB:           DB{Name: "slurm_acct_db", User: "slurm", Password: "harness-db-password"},
		JWTKey:       randomBytes(t, 32),
	}
}

// leftovers is what a cluster made that Stop must remove.
type leftovers struct {
	pids    []int
	netns   map[uint64]bool
	cgroups []string
	dir     string
}

func (c *Cluster) leftovers() leftovers {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := leftovers{netns: map[uint64]bool{}, dir: c.dir}
	if c.bridge != nil {
		l.pids = append(l.pids, c.bridge.cmd.Process.Pid)
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+itoa(c.bridge.cmd.Process.Pid)+"/ns/net", &st) == nil {
			l.netns[st.Ino] = true
		}
	}
	for _, h := range c.hosts {
		l.pids = append(l.pids, h.pause.cmd.Process.Pid)
		l.netns[h.netns] = true
		for _, p := range h.daemons {
			l.pids = append(l.pids, p.cmd.Process.Pid)
		}
		l.pids = append(l.pids, procsInCgroups(h.cgroups)...)
	}
	for _, hi := range c.hierarchy {
		l.cgroups = append(l.cgroups, filepath.Join(hi.base, c.id))
	}
	return l
}

// check reports anything of l that still exists.
func (l leftovers) check() []string {
	var found []string
	for _, pid := range l.pids {
		if syscall.Kill(pid, 0) != syscall.ESRCH {
			found = append(found, "process "+itoa(pid))
		}
	}
	for _, pid := range procsInNetns(l.netns) {
		found = append(found, "process in our network namespaces "+itoa(pid))
	}
	// A network namespace outlives its processes only when bound to a file (ip netns).
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for ino := range l.netns {
		if bytes.Contains(mi, []byte("net:["+itoa(int(ino))+"]")) {
			found = append(found, "bound network namespace "+itoa(int(ino)))
		}
	}
	dirs := l.cgroups
	if os.Getenv(KeepEnv) == "" {
		dirs = append(dirs, l.dir)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			found = append(found, d)
		}
	}
	return found
}

func TestCluster(t *testing.T) {
	rootFS := rootFSOrSkip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t0 := time.Now()
	c, err := Start(ctx, testConfig(t, rootFS))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Logf("cluster up in %s (folder %s)", time.Since(t0).Round(time.Millisecond), c.Dir())
	stopped := false
	defer func() {
		if stopped {
			return
		}
		if t.Failed() {
			dumpLogs(t, c)
			hold(t, c)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()

	run := func(t *testing.T, host string, args ...string) string {
		t.Helper()
		out, err := c.Exec(ctx, host, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	nodeStates := func() (map[string]string, error) {
		out, err := c.Exec(ctx, loginHost, "sinfo", "-h", "-N", "-o", "%N %T")
		states := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				states[f[0]] = f[1]
			}
		}
		return states, err
	}

	t.Run("sinfo on the login host shows both workers idle", func(t *testing.T) {
		got, err := nodeStates()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"worker-0": "idle", "worker-1": "idle"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sinfo: got %v, want %v", got, want)
		}
	})

	t.Run("srun -N2 hostname runs on both worker hosts", func(t *testing.T) {
		lines := strings.Fields(run(t, loginHost, "srun", "-N2", "hostname"))
		sort.Strings(lines)
		if want := []string{"demo-worker-0", "demo-worker-1"}; !reflect.DeepEqual(lines, want) {
			t.Fatalf("srun -N2 hostname: got %q, want %q", lines, want)
		}
	})

	t.Run("srun --gres=gpu:1 sees one GPU on each node", func(t *testing.T) {
		out := run(t, loginHost, "srun", "-N2", "--gres=gpu:1", "sh", "-c", `echo "$(hostname) CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		want := []string{"demo-worker-0 CUDA_VISIBLE_DEVICES=0", "demo-worker-1 CUDA_VISIBLE_DEVICES=0"}
		if !reflect.DeepEqual(lines, want) {
			t.Fatalf("got %q, want %q", lines, want)
		}
		if out := run(t, loginHost, "srun", "--gres=gpu:2", "printenv", "CUDA_VISIBLE_DEVICES"); strings.TrimSpace(out) != "0,1" {
			t.Fatalf("--gres=gpu:2: CUDA_VISIBLE_DEVICES=%q, want 0,1", strings.TrimSpace(out))
		}
	})

	t.Run("fake GPUs are character devices on workers only", func(t *testing.T) {
		out := run(t, "demo-worker-0", "stat", "-c", "%n %F %t:%T", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl")
		want := "/dev/nvidia0 character special file c3:0\n/dev/nvidia1 character special file c3:1\n/dev/nvidiactl character special file c3:ff\n"
		if out != want {
			t.Fatalf("got %q, want %q", out, want)
		}
		if _, err := c.Exec(ctx, ctrlHost, "test", "-e", "/dev/nvidia0"); err == nil {
			t.Fatal("the controller has /dev/nvidia0")
		}
	})

	t.Run("jobs run in cgroups below the host's own", func(t *testing.T) {
		out := run(t, loginHost, "srun", "-w", "worker-1", "grep", ":freezer:", "/proc/self/cgroup")
		if !strings.Contains(out, ":/slurm_worker-1/uid_0/job_") {
			t.Fatalf("job freezer cgroup: %q", out)
		}
		for _, hi := range c.hierarchy {
			if hi.name == "freezer" {
				d := filepath.Join(hi.base, c.id, "demo-worker-1", "slurm_worker-1")
				if _, err := os.Stat(d); err != nil {
					t.Fatalf("slurmd's cgroup is not below the host's: %v", err)
				}
			}
		}
	})

	t.Run("the JWT key is in place and scontrol token works", func(t *testing.T) {
		if out := run(t, ctrlHost, "stat", "-c", "%U %a %s", "/var/spool/slurmctld/jwt_hs256.key"); out != "slurm 600 32\n" {
			t.Fatalf("controller key: %q", out)
		}
		if out := run(t, acctHost, "stat", "-c", "%U %a %s", "/var/spool/slurmdbd/jwt_hs256.key"); out != "slurm 600 32\n" {
			t.Fatalf("slurmdbd key: %q", out)
		}
		if out := run(t, loginHost, "scontrol", "token", "username=slurm", "lifespan=60"); !strings.HasPrefix(out, "SLURM_JWT=ey") {
			t.Fatalf("scontrol token: %q", out)
		}
	})

	t.Run("an sbatch job is COMPLETED in sacct", func(t *testing.T) {
		id := strings.TrimSpace(run(t, loginHost, "sbatch", "--parsable", "-o", "job-%j.out", "--gres=gpu:1", "--wrap", "hostname; echo gpus=$CUDA_VISIBLE_DEVICES"))
		var state string
		err := c.WaitFor(ctx, "job "+id+" in sacct", func() (bool, error) {
			out, err := c.Exec(ctx, loginHost, "sacct", "-n", "-X", "-P", "-j", id, "-o", "State")
			state = strings.TrimSpace(out)
			return state == "COMPLETED", err
		})
		if err != nil {
			t.Fatalf("%v; sacct state %q", err, state)
		}
		out, err := os.ReadFile(filepath.Join(c.SharedDir(), "job-"+id+".out"))
		if err != nil || !strings.HasPrefix(string(out), "demo-worker-") || !strings.Contains(string(out), "gpus=0") {
			t.Fatalf("job output %q, %v", out, err)
		}
		tres := run(t, loginHost, "sacct", "-n", "-X", "-P", "-j", id, "-o", "AllocTRES")
		if !strings.Contains(tres, "gres/gpu=1") {
			t.Fatalf("sacct AllocTRES: %q", tres)
		}
	})

	t.Run("workers added and removed with reconfigure, twice; slurmctld keeps its PID", func(t *testing.T) {
		pid := c.PID(ctrlHost, Slurmctld)
		if pid == 0 {
			t.Fatal("no slurmctld PID")
		}
		conf, gres := readTestdata(t, "slurm.conf"), readTestdata(t, "gres.conf")
		grow := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("-[0-1]"), []byte("-[0-2]")) }
		for round := 1; round <= 2; round++ {
			// As the operator does: the node list first (a slurmd that starts on a slurm.conf
			// without its own node exits), then the worker.
			if err := c.UpdateSlurmFiles(map[string][]byte{"slurm.conf": grow(conf), "gres.conf": grow(gres)}); err != nil {
				t.Fatal(err)
			}
			if err := c.Reconfigure(ctx, ctrlHost); err != nil {
				t.Fatal(err)
			}
			if err := c.AddWorker(ctx, Host{Name: "demo-worker-2", SlurmName: "worker-2", GPUs: 2}); err != nil {
				t.Fatal(err)
			}
			err := c.WaitFor(ctx, "worker-2 idle", func() (bool, error) {
				s, err := nodeStates()
				return s["worker-2"] == "idle", err
			})
			if err != nil {
				t.Fatal(err)
			}
			out := run(t, loginHost, "srun", "-w", "worker-2", "--gres=gpu:2", "sh", "-c", `echo "$(hostname) $CUDA_VISIBLE_DEVICES"`)
			if out != "demo-worker-2 0,1\n" {
				t.Fatalf("round %d: srun on worker-2: %q", round, out)
			}

			run(t, ctrlHost, "scontrol", "update", "nodename=worker-2", "state=drain", "reason=scale-down")
			if err := c.StopWorker(ctx, "demo-worker-2"); err != nil {
				t.Fatal(err)
			}
			if c.PID("demo-worker-2", Slurmd) != 0 {
				t.Fatal("a stopped worker still has a slurmd PID")
			}
			if err := c.UpdateSlurmFiles(map[string][]byte{"slurm.conf": conf, "gres.conf": gres}); err != nil {
				t.Fatal(err)
			}
			if err := c.Reconfigure(ctx, ctrlHost); err != nil {
				t.Fatal(err)
			}
			err = c.WaitFor(ctx, "worker-2 gone", func() (bool, error) {
				s, err := nodeStates()
				_, there := s["worker-2"]
				return err == nil && !there && s["worker-0"] == "idle", err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.PID(ctrlHost, Slurmctld); got != pid {
				t.Fatalf("round %d: slurmctld PID %d, want %d (kept over reconfigure)", round, got, pid)
			}
		}
		if !strings.Contains(c.Logs("demo-worker-2"), "slurmd version") {
			t.Fatal("the logs of the stopped worker are gone")
		}
	})

	if t.Failed() {
		return
	}
	left := c.leftovers()
	t1 := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	t.Logf("stopped in %s", time.Since(t1).Round(time.Millisecond))
	if err := c.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if found := left.check(); len(found) > 0 {
		t.Fatalf("left behind after Stop: %q", found)
	}
}

// helperEnv makes TestKilledTestProcess's child run a cluster that it never stops.
const helperEnv = "SLURMHARNESS_TEST_HELPER"

// killedReport is what the helper prints once its cluster runs a job.
type killedReport struct {
	PIDs    []int
	NetNS   []uint64
	Cgroups []string
	Dir     string
}

func TestKilledTestProcessLeavesNothing(t *testing.T) {
	rootFS := rootFSOrSkip(t)
	if os.Getenv(helperEnv) != "" {
		runKilledHelper(t, rootFS)
		return
	}
	if os.Getenv(KeepEnv) != "" {
		t.Skipf("%s is set: the killed test process would keep its folder", KeepEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledTestProcessLeavesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rep killedReport
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			if err := json.Unmarshal([]byte(line), &rep); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if rep.Dir == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper did not start its cluster:\n%s", stderr.String())
	}
	t.Logf("helper runs a cluster with %d processes; killing it with SIGKILL", len(rep.PIDs))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l := leftovers{pids: rep.PIDs, netns: map[uint64]bool{}, cgroups: rep.Cgroups, dir: rep.Dir}
	for _, ino := range rep.NetNS {
		l.netns[ino] = true
	}
	var found []string
	err = waitFor(ctx, "the watchdog to clean up", func() (bool, error) {
		found = l.check()
		return len(found) == 0, nil
	})
	if err != nil {
		t.Fatalf("%v: left behind: %q", err, found)
	}
}

// runKilledHelper starts a cluster with a running job, reports, and waits to be killed.
func runKilledHelper(t *testing.T, rootFS string) {
	ctx := context.Background()
	c, err := Start(ctx, testConfig(t, rootFS))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, loginHost, "sbatch", "-o", "/dev/null", "--wrap", "sleep 300"); err != nil {
		t.Fatal(err)
	}
	err = c.WaitFor(ctx, "the job to run", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-o", "%T")
		return strings.TrimSpace(out) == "RUNNING", err
	})
	if err != nil {
		t.Fatal(err)
	}
	l := c.leftovers()
	rep := killedReport{PIDs: l.pids, Cgroups: l.cgroups, Dir: l.dir}
	for ino := range l.netns {
		rep.NetNS = append(rep.NetNS, ino)
	}
	data, _ := json.Marshal(rep)
	fmt.Printf("READY %s\n", data)
	time.Sleep(5 * time.Minute)
}

func dumpLogs(t *testing.T, c *Cluster) {
	for _, h := range c.Hosts() {
		t.Logf("logs of %s:\n%s", h, c.Logs(h))
	}
}

func hold(t *testing.T, c *Cluster) {
	d, err := time.ParseDuration(os.Getenv(HoldEnv))
	if err != nil || d <= 0 {
		return
	}
	t.Logf("%s=%s: the cluster stays up; look inside with: %s/enter HOST [COMMAND...]", HoldEnv, d, c.Dir())
	time.Sleep(d)
}

func TestJWTKeyPaths(t *testing.T) {
	cases := []struct {
		name            string
		slurm, slurmdbd string
		want            []string
	}{
		{"no jwt", "AuthType=auth/munge\n", "", nil},
		{"explicit key in both files", "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=/a/k\n", "authaltparameters=disable_token_creation,jwt_key=/b/k # c\n", []string{"/a/k", "/b/k"}},
		{"same key twice", "AuthAltParameters=jwt_key=/a/k\n", "AuthAltParameters=jwt_key=/a/k\n", []string{"/a/k"}},
		{"default is in StateSaveLocation", "AuthAltTypes=auth/jwt\nStateSaveLocation=/state\n", "", []string{"/state/jwt_hs256.key"}},
		{"relative paths are skipped", "AuthAltParameters=jwt_key=k\n", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dbd []byte
			if tc.slurmdbd != "" {
				dbd = []byte(tc.slurmdbd)
			}
			if got := jwtKeyPaths([]byte(tc.slurm), dbd); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateRejectsBadConfigs(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "usr/sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/sbin/slurmctld"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	good := func() Config {
		return Config{
			RootFS:     dir,
			SlurmFiles: map[string][]byte{"slurm.conf": nil},
			MungeKey:   []byte("k"),
			Controller: Host{Name: "c"},
			Workers:    []Host{{Name: "w"}},
		}
	}
	cfg := good()
	if err := validate(&cfg); err != nil {
		t.Fatalf("good config: %v", err)
	}
	cases := map[string]func(*Config){
		"no root file system":         func(c *Config) { c.RootFS = "" },
		"no slurm.conf":               func(c *Config) { c.SlurmFiles = map[string][]byte{"gres.conf": nil} },
		"a file name with a slash":    func(c *Config) { c.SlurmFiles["../x"] = nil },
		"no munge key":                func(c *Config) { c.MungeKey = nil },
		"accounting without slurmdbd": func(c *Config) { c.Accounting = &Host{Name: "a"} },
		"a host name twice":           func(c *Config) { c.Logins = []Host{{Name: "w"}} },
		"a bad host name":             func(c *Config) { c.Workers[0].Name = "w 1" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := good()
			mutate(&cfg)
			if err := validate(&cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
