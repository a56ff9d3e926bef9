package exporter

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// Source is what the collector asks Slurm: the operator's slurmrestd client serves it.
type Source interface {
	Nodes(ctx context.Context) ([]slurm.Node, error)
	Jobs(ctx context.Context) ([]slurm.Job, error)
	Diag(ctx context.Context) (slurm.Diag, error)
	Pings(ctx context.Context) ([]slurm.Ping, error)
	DatabasePings(ctx context.Context) ([]slurm.Ping, error)
}

var _ Source = (*slurm.Client)(nil)

// Options shape what the collector asks and exports.
type Options struct {
	// Cluster is the value of the cluster label every metric carries.
	Cluster string
	// Accounting asks slurmdbd for its ping (slurm_slurmdbd_up).
	Accounting bool
	// PerUser exports the slurm_user_* metrics (one series per user, account, partition and
	// state). Off, jobs are counted by account only.
	PerUser bool
	// Timeout bounds each request.
	Timeout time.Duration
	// MinInterval: answers younger than this are reused, so scrapes more frequent than this (or
	// from several Prometheus replicas) never add load on slurmctld.
	MinInterval time.Duration
	// MaxAge: a resource whose requests fail keeps exporting its last good answer until it is
	// this old; then its metrics are left out. Its age is always exported. Zero:
	// DefaultMaxAge (a zero age limit would leave out even an answer just fetched).
	MaxAge time.Duration
	// Now is the clock (tests may move it).
	Now func() time.Time
}

// resource names one request of a refresh.
type resource string

const (
	resNodes    resource = "nodes"
	resJobs     resource = "jobs"
	resDiag     resource = "diag"
	resPing     resource = "ping"
	resDatabase resource = "database"
)

// answer is the last good answer to one request, and how the last request went.
type answer struct {
	at     time.Time // when the last good answer came; zero: never
	value  any
	took   time.Duration
	errors int
	failed bool // the last request failed
}

// Collector is a prometheus.Collector that asks Slurm on a scrape.
type Collector struct {
	src   Source
	opt   Options
	descs map[*family]*prometheus.Desc

	mu        sync.Mutex
	refreshed time.Time
	upNow     bool
	answers   map[resource]*answer
}

// DefaultMaxAge is how long a failing resource's last good answer is exported when
// Options.MaxAge is not set.
const DefaultMaxAge = 90 * time.Second

// New returns a collector asking src.
func New(src Source, opt Options) *Collector {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	if opt.MaxAge <= 0 {
		opt.MaxAge = DefaultMaxAge
	}
	c := &Collector{src: src, opt: opt, descs: map[*family]*prometheus.Desc{}, answers: map[resource]*answer{}}
	for _, f := range families {
		c.descs[f] = prometheus.NewDesc(f.name, f.help, f.labels, prometheus.Labels{"cluster": opt.Cluster})
	}
	for _, r := range c.resources() {
		c.answers[r] = &answer{}
	}
	return c
}

func (c *Collector) resources() []resource {
	rs := []resource{resNodes, resJobs, resDiag, resPing}
	if c.opt.Accounting {
		rs = append(rs, resDatabase)
	}
	return rs
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect refreshes the answers unless they are younger than MinInterval (concurrent scrapes
// wait for one refresh), then sends the metrics of every answer no older than MaxAge.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	start := c.opt.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refreshed.IsZero() || start.Sub(c.refreshed) >= c.opt.MinInterval {
		c.refresh()
		c.refreshed = c.opt.Now()
	}
	now := c.opt.Now()
	e := &emitter{c: c, ch: ch}
	s := snapshot{}
	for _, r := range c.resources() {
		a := c.answers[r]
		e.add(requestErrors, float64(a.errors), string(r))
		e.add(requestDuration, a.took.Seconds(), string(r))
		if a.at.IsZero() {
			continue
		}
		age := now.Sub(a.at)
		e.add(answerAge, age.Seconds(), string(r))
		// Pings say whether something answers now: an old one is never served.
		pinged := r == resPing || r == resDatabase
		if pinged && a.failed || age > c.opt.MaxAge && age > c.opt.MinInterval {
			continue
		}
		s.set(r, a.value)
	}
	e.add(up, boolValue(c.upNow))
	if c.opt.Accounting {
		e.add(databaseUp, boolValue(s.databaseUp()))
	}
	s.emit(e, c.opt)
	e.add(scrapeDuration, c.opt.Now().Sub(start).Seconds())
}

// refresh asks for every resource at once, each request with its own timeout.
func (c *Collector) refresh() {
	var wg sync.WaitGroup
	type result struct {
		r     resource
		value any
		err   error
		took  time.Duration
	}
	results := make(chan result, len(c.answers))
	for _, r := range c.resources() {
		wg.Add(1)
		go func(r resource) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), c.opt.Timeout)
			defer cancel()
			t0 := time.Now()
			v, err := c.ask(ctx, r)
			results <- result{r: r, value: v, err: err, took: time.Since(t0)}
		}(r)
	}
	wg.Wait()
	close(results)
	now := c.opt.Now()
	for res := range results {
		a := c.answers[res.r]
		a.took, a.failed = res.took, res.err != nil
		if res.err != nil {
			a.errors++
			if res.r == resNodes {
				c.upNow = false
			}
			continue
		}
		a.at, a.value = now, res.value
		if res.r == resNodes {
			c.upNow = true
		}
	}
}

func (c *Collector) ask(ctx context.Context, r resource) (any, error) {
	switch r {
	case resNodes:
		return c.src.Nodes(ctx)
	case resJobs:
		return c.src.Jobs(ctx)
	case resDiag:
		return c.src.Diag(ctx)
	case resPing:
		return c.src.Pings(ctx)
	default:
		return c.src.DatabasePings(ctx)
	}
}

// emitter sends constant metrics of the collector's families.
type emitter struct {
	c  *Collector
	ch chan<- prometheus.Metric
}

func (e *emitter) add(f *family, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(e.c.descs[f], f.typ, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
