package slurm

import (
	"context"
	"net/http"
)

// Number is slurmrestd's optional number: {"set": true, "infinite": false, "number": 3}.
type Number struct {
	Set      bool  `json:"set"`
	Infinite bool  `json:"infinite"`
	Number   int64 `json:"number"`
}

// Diag is slurmctld's scheduler statistics (what sdiag prints). Times are in microseconds;
// the job counters count since slurmctld's statistics were last reset (at start, at midnight
// UTC, or by `sdiag --reset`).
type Diag struct {
	ServerThreads     int64     `json:"server_thread_count"`
	AgentQueueSize    int64     `json:"agent_queue_size"`
	DBDAgentQueueSize int64     `json:"dbd_agent_queue_size"`
	ScheduleCycleLast int64     `json:"schedule_cycle_last"`
	ScheduleCycleMax  int64     `json:"schedule_cycle_max"`
	ScheduleCycleMean int64     `json:"schedule_cycle_mean"`
	ScheduleCycles    int64     `json:"schedule_cycle_total"`
	ScheduleQueue     int64     `json:"schedule_queue_length"`
	JobsSubmitted     int64     `json:"jobs_submitted"`
	JobsStarted       int64     `json:"jobs_started"`
	JobsCompleted     int64     `json:"jobs_completed"`
	JobsCanceled      int64     `json:"jobs_canceled"`
	JobsFailed        int64     `json:"jobs_failed"`
	BackfillCycleLast int64     `json:"bf_cycle_last"`
	BackfillCycleMax  int64     `json:"bf_cycle_max"`
	BackfillCycleMean int64     `json:"bf_cycle_mean"`
	BackfillCycles    int64     `json:"bf_cycle_counter"`
	BackfillQueue     int64     `json:"bf_queue_len"`
	BackfilledJobs    int64     `json:"bf_backfilled_jobs"`
	BackfillActive    bool      `json:"bf_active"`
	RPCsByMessageType []RPCStat `json:"rpcs_by_message_type"`
	RPCsByUser        []RPCStat `json:"rpcs_by_user"`
}

// RPCStat counts the RPCs of one message type (or one user) and the time slurmctld spent on
// them, in microseconds.
type RPCStat struct {
	MessageType string `json:"message_type"`
	User        string `json:"user"`
	Count       int64  `json:"count"`
	TotalTime   int64  `json:"total_time"`
}

// Diag returns slurmctld's scheduler statistics.
func (c *Client) Diag(ctx context.Context) (Diag, error) {
	var out struct {
		Statistics Diag `json:"statistics"`
	}
	err := c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/diag", nil, &out)
	return out.Statistics, err
}

// Ping is one slurmctld (or slurmdbd) as slurmrestd's ping sees it. Latency is in
// microseconds.
type Ping struct {
	Host       string `json:"hostname"`
	Pinged     string `json:"pinged"`
	Responding bool   `json:"responding"`
	Latency    int64  `json:"latency"`
	Mode       string `json:"mode"`
	Primary    bool   `json:"primary"`
}

// Pings asks every slurmctld of the cluster (primary and backups) whether it answers.
func (c *Client) Pings(ctx context.Context) ([]Ping, error) {
	var out struct {
		Pings []Ping `json:"pings"`
	}
	err := c.do(ctx, http.MethodGet, "/slurm/"+APIVersion+"/ping", nil, &out)
	return out.Pings, err
}

// DatabasePings asks slurmdbd whether it answers; slurmrestd serves it only when it loads the
// slurmdbd endpoints (clusters with accounting).
func (c *Client) DatabasePings(ctx context.Context) ([]Ping, error) {
	var out struct {
		Pings []Ping `json:"pings"`
	}
	err := c.do(ctx, http.MethodGet, "/slurmdb/"+APIVersion+"/ping", nil, &out)
	return out.Pings, err
}
