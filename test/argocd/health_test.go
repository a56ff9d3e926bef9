// Package argocd runs the operator chart's Argo CD health check (a Lua script, as Argo CD runs
// it: the object in the global obj, the result a table with status and message) on statuses the
// operator writes.
package argocd

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// health runs the script on a SlurmCluster given as JSON.
func health(t *testing.T, script, object string) (status, message string) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(object), &obj); err != nil {
		t.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("the health check fails: %v", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returned %v, not a table", L.Get(-1))
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	}
	return lua.LNil
}

// cluster is a SlurmCluster at generation 2 with these status fields (JSON, without braces).
func cluster(status string) string {
	if status == "" {
		return `{"metadata":{"name":"fpt-hpc","generation":2}}`
	}
	return `{"metadata":{"name":"fpt-hpc","generation":2},"status":{` + status + `}}`
}

func cond(typ, status, reason, msg string) string {
	return `{"type":"` + typ + `","status":"` + status + `","reason":"` + reason + `","message":"` + msg + `"}`
}

func TestTheArgoCDHealthCheck(t *testing.T) {
	b, err := os.ReadFile("../../charts/slurm-operator/files/argocd-health.lua")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	ready := cond("Available", "True", "ClusterReady", "slurmctld is up, the jail is populated, 2/2 workers ready")
	jailDone := cond("JailPopulated", "True", "Populated", "the populate Job completed")
	for _, tc := range []struct {
		name, status, want, inMessage string
	}{
		{"no status yet", "", "Progressing", "generation 2"},
		{"an older generation observed", `"observedGeneration":1,"conditions":[` + ready + `,` + jailDone + `]`, "Progressing", "generation 2"},
		{"available for the current generation", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `]`, "Healthy", "2/2 workers ready"},
		{"available, with a warning", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("Degraded", "True", "OptionalAPIMissing", "no ServiceMonitor: the monitoring.coreos.com API is not served") + `]`, "Healthy", "no ServiceMonitor"},
		{"populating the jail", `"observedGeneration":2,"conditions":[` + cond("Available", "False", "JailNotPopulated", "the jail is not populated yet") + `,` +
			cond("JailPopulated", "False", "Populating", "the populate Job is running") + `]`, "Progressing", "populate Job is running"},
		{"pods starting", `"observedGeneration":2,"conditions":[` + cond("Available", "False", "NoWorkerReady", "0/2 worker pods ready") + `,` + jailDone + `]`, "Progressing", "0/2 worker pods ready"},
		{"scaling down", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("ScalingDown", "True", "WaitingForJobs", "waiting for the jobs on worker-3 to end") + `]`, "Progressing", "worker-3"},
		{"replacing workers", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("WorkersUpdating", "True", "ReplacingPods", "replacing worker-0") + `]`, "Progressing", "replacing worker-0"},
		{"a Slurm upgrade waiting for slurmctld", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("SlurmUpgrading", "True", "WaitingForController", "waiting for every controller pod to run slurmctld:26.05") + `]`, "Progressing", "slurmctld:26.05"},
		{"an upgrade whose backup failed", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("SlurmUpgrading", "True", "BackupFailed", "the backup Job fpt-upgrade-backup-1 failed") + `]`, "Degraded", "backup Job fpt-upgrade-backup-1 failed"},
		{"an upgrade waiting for the spec to say where the backup goes", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("SlurmUpgrading", "True", "BackupNotConfigured", "set spec.upgrades.backup.volumeSourceName") + `]`, "Suspended", "spec.upgrades.backup"},
		{"an upgrade taking its backup", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("SlurmUpgrading", "True", "WaitingForBackup", "the backup Job fpt-upgrade-backup-1 writes") + `]`, "Progressing", "backup Job"},
		{"a refused Slurm release", `"observedGeneration":2,"conditions":[` + cond("Available", "False", "SlurmReleaseRefused", "cannot downgrade Slurm 26.05 to 24.11") + `]`, "Degraded", "cannot downgrade"},
		{"a spec that cannot be rendered", `"observedGeneration":2,"conditions":[` + cond("Available", "False", "RenderFailed", "worker: no such volume source") + `]`, "Degraded", "no such volume source"},
		{"the populate Job failed", `"observedGeneration":2,"conditions":[` + cond("Available", "False", "JailNotPopulated", "the jail is not populated yet") + `,` +
			cond("JailPopulated", "False", "JobFailed", "jail is not empty and has no marker") + `]`, "Degraded", "no marker"},
		{"slurmctld cannot read its state", `"observedGeneration":2,"conditions":[` + cond("Available", "False", "ControllerStateUnreadable", "st-controller-0: slurmctld: fatal: Incomplete job state save file") + `]`, "Degraded", "Incomplete job state"},
		{"a lost JWT key", `"observedGeneration":2,"conditions":[` + cond("Available", "False", "JWTKeyMissing", "the JWT key Secret fpt-hpc-jwt-key is gone") + `]`, "Degraded", "is gone"},
		{"objects refused while available", `"observedGeneration":2,"conditions":[` + ready + `,` + jailDone + `,` +
			cond("Degraded", "True", "ApplyFailed", "ConfigMap fpt-hpc-slurm-config: too long") + `]`, "Degraded", "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := health(t, script, cluster(tc.status))
			if status != tc.want || !strings.Contains(msg, tc.inMessage) {
				t.Errorf("health = %s %q, want %s with %q", status, msg, tc.want, tc.inMessage)
			}
		})
	}
}
