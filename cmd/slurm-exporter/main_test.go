package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRequiresTheSlurmrestdURLAndTheTokenFile(t *testing.T) {
	for _, args := range [][]string{nil, {"--slurmrestd-url=http://x:6820"}, {"--token-file=/t"}, {"--slurmrestd-url=http://x:6820", "--jwt-key-file=/k"}, {"--no-such-flag"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	c, err := parse([]string{"--slurmrestd-url=http://x:6820", "--token-file=/t", "--cluster=demo", "--per-user-metrics=false"})
	if err != nil || c.opt.Cluster != "demo" || c.user != "slurm-metrics" || c.opt.PerUser || c.opt.MinInterval != 10*time.Second {
		t.Fatalf("parse: %+v, %v", c, err)
	}
}

// With slurmrestd not listening, the exporter serves /healthz and a /metrics that says Slurm
// does not answer (no Slurm counts at all), and stops on its context.
func TestServesUpZeroWhenSlurmrestdIsUnreachable(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("a.b.c\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	restd := closed.Addr().String()
	closed.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen-address=" + addr, "--slurmrestd-url=http://" + restd, "--token-file=" + token, "--cluster=demo", "--timeout=1s"})
	}()
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(body, `slurm_up{cluster="demo"} 0`) || strings.Contains(body, "slurm_node_state") {
		t.Errorf("/metrics with slurmrestd unreachable:\n%s", body)
	}
	if !strings.Contains(body, `slurm_exporter_request_errors_total{cluster="demo",resource="nodes"} 1`) {
		t.Errorf("the failed request is not counted:\n%s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// The exporter does not start without its token, and names the file it could not read.
func TestRunRefusesAMissingOrEmptyToken(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(empty, []byte("\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(t.TempDir(), "missing"), empty} {
		err := run(context.Background(), []string{"--slurmrestd-url=http://127.0.0.1:1", "--token-file=" + f})
		if err == nil || !strings.Contains(err.Error(), "token") {
			t.Errorf("%s: run answered %v, want an error about the token", f, err)
		}
	}
}
