package slurmconf

import (
	"fmt"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// JobSubmitLua is the job_submit/lua script slurmctld reads next to slurm.conf.
const JobSubmitLua = "job_submit.lua"

// jobSubmitLua refuses every job submission and modification by the exporter's user, so that
// its token, which the exporter pod holds, cannot run anything on a worker. Other jobs pass
// unchanged.
func jobSubmitLua() string {
	return fmt.Sprintf(`-- %s
-- %s (uid %d) is the exporter's read-only Slurm user: the exporter pod holds a token for
-- it, and a stolen token must not run anything on a worker.
local metrics_uid = %d

function slurm_job_submit(job_desc, part_list, submit_uid)
	if submit_uid == metrics_uid then
		slurm.log_user("%s is a read-only user for metrics: it cannot submit jobs")
		return slurm.ERROR
	end
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	if modify_uid == metrics_uid then
		slurm.log_user("%s is a read-only user for metrics: it cannot change jobs")
		return slurm.ERROR
	end
	return slurm.SUCCESS
end
`, generatedHeader, slurmfacts.MetricsUser, slurmfacts.MetricsUID, slurmfacts.MetricsUID, slurmfacts.MetricsUser, slurmfacts.MetricsUser)
}
