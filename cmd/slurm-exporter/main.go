// slurm-exporter serves Prometheus metrics of one Slurm cluster: nodes, jobs, scheduler
// statistics and controller health, read from slurmctld through slurmrestd with the token the
// operator keeps in a Secret for the unprivileged user slurm-metrics. The exporter holds no
// key: it reads the token file again for every request, so the operator's renewals reach it
// when the kubelet updates the mounted Secret. docs/observability.md lists the metrics.
//
//	slurm-exporter --slurmrestd-url=http://NAME-controller:6820 --token-file=/etc/slurm-exporter/token --cluster=NAME
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slurm-k8s/slurm-operator/internal/exporter"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "slurm-exporter:", err)
		os.Exit(1)
	}
}

// config is the exporter's command line.
type config struct {
	listen, restdURL, tokenFile, user string
	opt                               exporter.Options
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("slurm-exporter", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen-address", fmt.Sprintf(":%d", slurmfacts.ExporterPort), "address to serve /metrics and /healthz on")
	fs.StringVar(&c.restdURL, "slurmrestd-url", "", "slurmrestd's URL (required)")
	fs.StringVar(&c.tokenFile, "token-file", "", "a file holding a JWT for --user, read again for every request (required)")
	fs.StringVar(&c.user, "user", slurmfacts.MetricsUser, "the Slurm user the token names")
	fs.StringVar(&c.opt.Cluster, "cluster", "", "the cluster label of every metric")
	fs.BoolVar(&c.opt.Accounting, "accounting", false, "ask slurmdbd whether it answers (clusters with accounting)")
	fs.BoolVar(&c.opt.PerUser, "per-user-metrics", true, "export jobs and RPCs per user (one series per user, account, partition and state)")
	fs.DurationVar(&c.opt.Timeout, "timeout", 30*time.Second, "limit of each request to slurmrestd (10,000 jobs take slurmrestd about 8 s on 2 cores)")
	fs.DurationVar(&c.opt.MinInterval, "min-interval", 10*time.Second, "answers younger than this are reused by the next scrape")
	fs.DurationVar(&c.opt.MaxAge, "max-age", exporter.DefaultMaxAge, "a failing resource's last good answer is exported (with its age) until it is this old")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.restdURL == "" || c.tokenFile == "" {
		return c, errors.New("--slurmrestd-url and --token-file are required")
	}
	return c, nil
}

func run(ctx context.Context, args []string) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	if _, err := readToken(c.tokenFile); err != nil {
		return err
	}
	client := slurm.NewClient(c.restdURL, nil)
	client.User = c.user
	client.Tokens = func() (string, error) { return readToken(c.tokenFile) }
	client.HTTP.Timeout = c.opt.Timeout

	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.New(client, c.opt), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Addr: c.listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	slog.Info("serving", "address", c.listen, "slurmrestd", c.restdURL, "cluster", c.opt.Cluster)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shut)
	}
}

// readToken reads the token file; a missing or empty file is an error naming it.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("the token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the token file %s is empty", file)
	}
	return tok, nil
}
