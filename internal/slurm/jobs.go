package slurm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// BatchJob is a batch job the operator submits itself (an active check): a script run on the
// named nodes with the nodes to itself.
type BatchJob struct {
	Name string
	// Script is the whole batch script, "#!" line included.
	Script string
	// Nodes are the nodes the job must run on, all of them; it asks for exactly these.
	Nodes []string
	// Partitions the job may run in (comma-joined for Slurm); empty means the default one.
	Partitions []string
	// TimeLimit is the job's run time limit, rounded up to whole minutes.
	TimeLimit time.Duration
	// StartBy is the latest time the job may start; Slurm cancels it after that (state
	// DEADLINE) instead of keeping it queued.
	StartBy time.Time
	// Priority, when not 0, is the job's fixed priority (the operator's user may set it).
	Priority uint32
	// TRESPerNode is what the job asks of each node besides the whole node, e.g. gres/gpu:8
	// (a GPU is the job's only when asked for).
	TRESPerNode string
	// Environment holds NAME=value pairs; Slurm requires at least one.
	Environment []string
}

// Submit submits the job and returns its ID. The job has its nodes to itself (sbatch
// --exclusive): it never shares a node with another job, and no job starts beside it.
func (c *Client) Submit(ctx context.Context, j BatchJob) (int64, error) {
	env := j.Environment
	if len(env) == 0 {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	minutes := int64((j.TimeLimit + time.Minute - 1) / time.Minute)
	if minutes < 1 {
		minutes = 1
	}
	desc := map[string]any{
		"name":                      j.Name,
		"script":                    j.Script,
		"environment":               env,
		"current_working_directory": "/tmp",
		"standard_output":           "/dev/null",
		"standard_error":            "/dev/null",
		"required_nodes":            j.Nodes,
		"minimum_nodes":             len(j.Nodes),
		"maximum_nodes":             len(j.Nodes),
		"shared":                    []string{"none"},
		"time_limit":                map[string]any{"set": true, "number": minutes},
	}
	if j.TRESPerNode != "" {
		desc["tres_per_node"] = j.TRESPerNode
	}
	if len(j.Partitions) > 0 {
		desc["partition"] = strings.Join(j.Partitions, ",")
	}
	if !j.StartBy.IsZero() {
		// Slurm's deadline is when the job must have ended: it cancels a job whose start plus
		// time limit would pass it.
		desc["deadline"] = j.StartBy.Add(time.Duration(minutes) * time.Minute).Unix()
	}
	if j.Priority > 0 {
		desc["priority"] = map[string]any{"set": true, "number": j.Priority}
	}
	var out struct {
		ID *int64 `json:"job_id"`
	}
	path := "/slurm/" + APIVersion + "/job/submit"
	if err := c.do(ctx, http.MethodPost, path, map[string]any{"job": desc}, &out); err != nil {
		return 0, err
	}
	if out.ID == nil || *out.ID == 0 {
		return 0, fmt.Errorf("slurmrestd %s: no job ID in the answer", path)
	}
	return *out.ID, nil
}

// SetNodeComment sets a node's comment (scontrol update NodeName= Comment=), which sinfo and
// scontrol show; "" clears it.
func (c *Client) SetNodeComment(ctx context.Context, name, comment string) error {
	return c.do(ctx, http.MethodPost, "/slurm/"+APIVersion+"/node/"+name, map[string]any{"comment": comment}, nil)
}

// SetJobAdminComment sets a job's administrator comment (scontrol update job=ID
// AdminComment=…).
func (c *Client) SetJobAdminComment(ctx context.Context, id int64, comment string) error {
	return c.do(ctx, http.MethodPost, "/slurm/"+APIVersion+"/job/"+strconv.FormatInt(id, 10), map[string]any{"admin_comment": comment}, nil)
}

// Job returns one job, and false when slurmctld no longer knows it (it ended more than
// MinJobAge ago, or never was).
func (c *Client) Job(ctx context.Context, id int64) (Job, bool, error) {
	var out struct {
		Jobs []Job `json:"jobs"`
	}
	err := c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/job/"+strconv.FormatInt(id, 10), nil, &out)
	var e *Error
	if errors.As(err, &e) && (e.Status == http.StatusNotFound || strings.Contains(strings.ToLower(e.Error()), "invalid job id")) {
		return Job{}, false, nil
	}
	if err != nil {
		return Job{}, false, err
	}
	for _, j := range out.Jobs {
		if j.ID == id {
			return j, true, nil
		}
	}
	return Job{}, false, nil
}

// CancelJob cancels a job (scancel); a job slurmctld no longer knows is no error.
func (c *Client) CancelJob(ctx context.Context, id int64) error {
	err := c.do(ctx, http.MethodDelete, "/slurm/"+APIVersion+"/job/"+strconv.FormatInt(id, 10), nil, nil)
	var e *Error
	if errors.As(err, &e) && (e.Status == http.StatusNotFound || strings.Contains(strings.ToLower(e.Error()), "invalid job id")) {
		return nil
	}
	return err
}
