package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// APIVersion is the slurmrestd data parser the client speaks.
const APIVersion = "v0.0.42"

// Client talks to one slurmrestd.
type Client struct {
	// BaseURL is slurmrestd's address, for example http://NAME-controller:6820.
	BaseURL string
	// Key is the cluster's JWT key (the HS256 secret slurmctld verifies tokens with).
	Key []byte
	// User is the Slurm user the requests speak for: SlurmUser or root for the operator, which
	// signs its tokens with Key; MetricsUser for the exporter, which is handed its tokens.
	User string
	// Tokens, when set, gives the token of each request instead of one signed with Key: the
	// exporter holds no key, only the short-lived token the operator keeps in a Secret.
	Tokens func() (string, error)
	HTTP   *http.Client
	// Now is the clock (tests may fix it).
	Now func() time.Time
}

// NewClient returns a client for slurmrestd at baseURL acting as the slurm user.
func NewClient(baseURL string, key []byte) *Client {
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/"), Key: key, User: slurmfacts.SlurmUser, HTTP: &http.Client{Timeout: 15 * time.Second}, Now: time.Now}
}

func (c *Client) token() (string, error) {
	if c.Tokens != nil {
		return c.Tokens()
	}
	return Token(c.Key, c.User, c.Now(), 10*time.Minute)
}

// apiError is one entry of slurmrestd's "errors" array.
type apiError struct {
	Description string `json:"description"`
	Number      int    `json:"error_number"`
	Error       string `json:"error"`
}

// Error is a failed request: the HTTP status and slurmrestd's errors.
type Error struct {
	Status int
	Errors []apiError
	Path   string
}

func (e *Error) Error() string {
	var parts []string
	for _, a := range e.Errors {
		parts = append(parts, strings.TrimSpace(a.Description+" "+a.Error))
	}
	return fmt.Sprintf("slurmrestd %s: HTTP %d: %s", e.Path, e.Status, strings.Join(parts, "; "))
}

func (c *Client) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	tok, err := c.token()
	if err != nil {
		return err
	}
	req.Header.Set("X-SLURM-USER-TOKEN", tok)
	req.Header.Set("X-SLURM-USER-NAME", c.User)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("slurmrestd %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var envelope struct {
			Errors []apiError `json:"errors"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&envelope)
		return &Error{Status: resp.StatusCode, Errors: envelope.Errors, Path: path}
	}
	errs, err := decodeAnswer(resp.Body, out)
	if err != nil {
		return fmt.Errorf("slurmrestd %s: decode: %w", path, err)
	}
	if len(errs) > 0 {
		return &Error{Status: resp.StatusCode, Errors: errs, Path: path}
	}
	return nil
}

// decodeAnswer decodes slurmrestd's answer as it streams in: its errors, and each top-level
// field out (a pointer to a struct) has, matched by JSON name as encoding/json does. Nothing
// else is kept, so a list of 10,000 jobs (about 90 MB of JSON) costs the fields out asks for,
// not the whole text.
func decodeAnswer(r io.Reader, out any) ([]apiError, error) {
	fields := map[string]any{}
	if out != nil {
		v := reflect.ValueOf(out).Elem()
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			fields[strings.ToLower(name)] = v.Field(i).Addr().Interface()
		}
	}
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	var errs []apiError
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		dst, ok := fields[strings.ToLower(key)]
		switch {
		case key == "errors":
			err = dec.Decode(&errs)
		case ok:
			err = dec.Decode(dst)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return errs, nil
}

// ErrIncompleteAnswer is an answer of slurmrestd that does not say what the nodes are doing: no
// node list, or nodes without names. It must never be read as "nothing runs".
var ErrIncompleteAnswer = errors.New("slurmrestd's answer does not account for the nodes")

// Nodes lists every node slurmctld knows. An answer without a node list, or with a node that
// has no name, is an error (ErrIncompleteAnswer), never an empty list.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out struct {
		Nodes *[]Node `json:"nodes"`
	}
	path := "/slurm/" + APIVersion + "/nodes"
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	if out.Nodes == nil {
		return nil, fmt.Errorf("slurmrestd %s: no node list: %w", path, ErrIncompleteAnswer)
	}
	for i, n := range *out.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("slurmrestd %s: node %d has no name: %w", path, i, ErrIncompleteAnswer)
		}
	}
	return *out.Nodes, nil
}

// Node returns one node.
func (c *Client) Node(ctx context.Context, name string) (Node, error) {
	var out struct {
		Nodes []Node `json:"nodes"`
	}
	if err := c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/node/"+url.PathEscape(name), nil, &out); err != nil {
		return Node{}, err
	}
	if len(out.Nodes) != 1 {
		return Node{}, fmt.Errorf("slurmrestd: node %s: %d nodes in the answer", name, len(out.Nodes))
	}
	return out.Nodes[0], nil
}

// Drain drains a node with one of the operator's reasons (slurmfacts.Drain*). A reason without
// slurmfacts.DrainReasonPrefix is refused: the operator would never lift that drain.
func (c *Client) Drain(ctx context.Context, name, reason string) error {
	if !strings.HasPrefix(reason, slurmfacts.DrainReasonPrefix) {
		return fmt.Errorf("drain %s: reason %q does not start with %q", name, reason, slurmfacts.DrainReasonPrefix)
	}
	body := map[string]any{"state": []string{"DRAIN"}, "reason": reason}
	return c.do(ctx, http.MethodPost, "/slurm/"+APIVersion+"/node/"+url.PathEscape(name), body, nil)
}

// ResumeIfOwned lifts a drain the operator set, and reports whether it did. A drain with any
// other reason (an admin's) is left alone; so is a node that is not drained.
func (c *Client) ResumeIfOwned(ctx context.Context, name string) (bool, error) {
	n, err := c.Node(ctx, name)
	if err != nil {
		return false, err
	}
	if !n.OwnedDrain() {
		return false, nil
	}
	// The REST resume keeps the old reason; clear it so the node does not look drained by us.
	body := map[string]any{"state": []string{"RESUME"}, "reason": ""}
	if err := c.do(ctx, http.MethodPost, "/slurm/"+APIVersion+"/node/"+url.PathEscape(name), body, nil); err != nil {
		return false, err
	}
	return true, nil
}

// SetAddress points slurmctld at a node's new address (scontrol update NodeAddr=). slurmctld
// resolves a node's NodeAddr once and keeps the answer: a pod replaced under the same name
// gets a new address, and without this slurmctld keeps sending to the old one until the node
// is marked not responding. Setting an address also forgets the one it had resolved.
func (c *Client) SetAddress(ctx context.Context, name, address string) error {
	body := map[string]any{"address": address}
	return c.do(ctx, http.MethodPost, "/slurm/"+APIVersion+"/node/"+url.PathEscape(name), body, nil)
}

// SetPower asks slurmctld to power a node up (POWER_UP: ResumeProgram runs, the node is
// POWERING_UP until its slurmd registers) or down (POWER_DOWN: SuspendProgram runs once the node
// runs nothing, the node is POWERING_DOWN for SuspendTimeout, then POWERED_DOWN).
func (c *Client) SetPower(ctx context.Context, name string, up bool) error {
	state := "POWER_DOWN"
	if up {
		state = "POWER_UP"
	}
	body := map[string]any{"state": []string{state}}
	return c.do(ctx, http.MethodPost, "/slurm/"+APIVersion+"/node/"+url.PathEscape(name), body, nil)
}

// DeleteNode removes a node from slurmctld (dynamic nodes). slurmctld refuses while the node
// runs jobs ("Requested nodes are busy").
func (c *Client) DeleteNode(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/slurm/"+APIVersion+"/node/"+url.PathEscape(name), nil, nil)
}

// Reconfigure asks slurmctld (and every slurmd) to re-read the config; daemons keep their PIDs
// and running jobs survive.
func (c *Client) Reconfigure(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/reconfigure", nil, nil)
}

// Ping reports whether slurmctld answers. It does not validate credentials (slurmrestd answers
// /ping even with a bad token); use Nodes for that.
func (c *Client) Ping(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/ping", nil, nil)
}

// Job is what the operator and the exporter need to know of a job.
type Job struct {
	ID   int64  `json:"job_id"`
	Name string `json:"name"`
	// Comment is the job's comment (sbatch --comment, or scontrol update from the job itself).
	Comment string `json:"comment"`
	// AdminComment is the job's administrator comment (scontrol update job AdminComment=…).
	AdminComment string   `json:"admin_comment"`
	State        []string `json:"job_state"`
	Nodes        string   `json:"nodes"`
	Exit         struct {
		ReturnCode struct {
			Number int64 `json:"number"`
		} `json:"return_code"`
	} `json:"exit_code"`
	Resources *JobResources `json:"job_resources"`
	Partition string        `json:"partition"`
	User      string        `json:"user_name"`
	Account   string        `json:"account"`
	// Reason is why a pending job waits (Resources, Priority, ReqNodeNotAvail, …); None when
	// it runs.
	Reason string `json:"state_reason"`
	// TRESRequested and TRESAllocated are Slurm's TRES strings: cpu=2,mem=3G,node=2,gres/gpu=4.
	TRESRequested string `json:"tres_req_str"`
	TRESAllocated string `json:"tres_alloc_str"`
	// RequiredNodes are the nodes the job asked for by name (sbatch -w).
	RequiredNodes Hostlist `json:"required_nodes"`
	// SubmitTime is when the job was submitted, in seconds since the epoch.
	SubmitTime Number `json:"submit_time"`
	// StartTime is when the job was given its nodes (before they are powered up, for nodes
	// that power saving holds down), or when a pending job is expected to start.
	StartTime Number `json:"start_time"`
}

// JobResources are what a job was given.
type JobResources struct {
	Nodes struct {
		Allocation []NodeAllocation `json:"allocation"`
	} `json:"nodes"`
}

// NodeAllocation is one node a job was given.
type NodeAllocation struct {
	Name string `json:"name"`
}

// OnNodes gives the job the named nodes (for tests and stand-ins).
func (j *Job) OnNodes(names ...string) {
	j.Resources = &JobResources{}
	for _, n := range names {
		j.Resources.Nodes.Allocation = append(j.Resources.Nodes.Allocation, NodeAllocation{Name: n})
	}
}

// NodeNames are the nodes the job holds, or, before it starts, those it asked for by name.
func (j Job) NodeNames() []string {
	if j.Resources != nil && len(j.Resources.Nodes.Allocation) > 0 {
		out := make([]string, len(j.Resources.Nodes.Allocation))
		for i, a := range j.Resources.Nodes.Allocation {
			out[i] = a.Name
		}
		return out
	}
	return j.RequiredNodes
}

// Has reports whether the job's state holds the flag (PENDING, RUNNING, COMPLETING, …).
func (j Job) Has(flag string) bool { return slices.Contains(j.State, flag) }

// Jobs lists the jobs slurmctld holds: pending, running, and those that ended less than
// MinJobAge ago. An answer without a job list is an error, never an empty queue.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	var out struct {
		Jobs *[]Job `json:"jobs"`
	}
	path := "/slurm/" + APIVersion + "/jobs"
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	if out.Jobs == nil {
		return nil, fmt.Errorf("slurmrestd %s: no job list: %w", path, ErrIncompleteAnswer)
	}
	return *out.Jobs, nil
}

// RunningOn lists the IDs of the running or completing jobs that hold the node.
func (c *Client) RunningOn(ctx context.Context, node string) ([]int64, error) {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, j := range jobs {
		if !j.Has("RUNNING") && !j.Has("COMPLETING") || j.Resources == nil {
			continue
		}
		for _, a := range j.Resources.Nodes.Allocation {
			if a.Name == node {
				ids = append(ids, j.ID)
				break
			}
		}
	}
	return ids, nil
}
