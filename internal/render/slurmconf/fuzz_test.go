package slurmconf_test

import (
	"strings"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/fuzzspec"
)

// The fuzz targets feed user text into every spec field that reaches a Slurm config file. A
// spec the API server would refuse is skipped (the CRD's schema and CEL rules, in process);
// for every accepted one, the files must have the lines and settings of the same spec with
// harmless values: user text may change a value, never add a line or a setting. `make fuzz`
// runs each target for a while; `go test` runs their seeds.

func FuzzSlurmConfigFiles(f *testing.F) {
	f.Add("demo", "MaxJobCount=5", "/etc/slurm/prolog.sh", "MaxNodes=2", "yes", "1-00:00:00")
	f.Add("demo", "MaxJobCount=5\nSlurmUser=root", "/bin/true\nEpilog=/x", "MaxNodes=2\nNodeName=x", "yes CgroupPlugin=x", "forever")
	f.Add("x", "# a comment", "/bin/true,/usr/bin/env", "MaxTime=1 Default=NO", "no", "UNLIMITED")
	specs := fuzzspec.New(f, "slurm_v1alpha1_slurmcluster")
	render := func(t *testing.T, clusterName, extra, prolog, options, cgroup, maxTime string) (map[string]string, bool) {
		sc, ok := specs.Accepted(t, func(s map[string]any) {
			s["clusterName"] = clusterName
			conf := fuzzspec.Sub(s, "slurmConfig")
			conf["extraSlurmConf"] = []any{extra}
			conf["prolog"] = prolog
			conf["partitions"] = []any{map[string]any{"name": "main", "default": true, "options": options, "maxTime": maxTime}}
			conf["cgroupConfig"] = map[string]any{"ConstrainCores": cgroup}
		})
		if !ok {
			return nil, false
		}
		return slurmconf.Files(base.Input{Cluster: sc}), true
	}
	f.Fuzz(func(t *testing.T, clusterName, extra, prolog, options, cgroup, maxTime string) {
		got, ok := render(t, clusterName, extra, prolog, options, cgroup, maxTime)
		if !ok {
			return
		}
		want, ok := render(t, "demo", "MaxJobCount=5", "/bin/true", "MaxNodes=1", "yes", "1-00:00:00")
		if !ok {
			t.Fatal("the harmless spec is refused")
		}
		for name := range want {
			fuzzspec.SameShape(t, name, got[name], want[name])
		}
	})
}

func FuzzSlurmdbdConf(f *testing.F) {
	f.Add("db.example.com", "slurm", "slurm_acct_db", "g00d-Pass_word")
	f.Add("db\nStorageUser=root", "slurm x", "a#b", "bad#pass\nStorageUser=root")
	specs := fuzzspec.New(f, "slurm_v1alpha1_slurmcluster_externaldb")
	render := func(t *testing.T, host, user, database, password string) (string, bool) {
		sc, ok := specs.Accepted(t, func(s map[string]any) {
			db := fuzzspec.Sub(fuzzspec.Sub(fuzzspec.Sub(s, "slurmNodes"), "accounting"), "externalDB")
			db["host"], db["user"], db["database"] = host, user, database
		})
		// The password comes from a Secret: the operator writes it only if CheckValue agrees.
		if !ok || slurmconf.CheckValue(password) != nil {
			return "", false
		}
		e := sc.Spec.SlurmNodes.Accounting.ExternalDB
		in := base.Input{Cluster: sc, Database: base.Database{Host: e.Host, Port: e.Port, User: e.User, Password: password, Name: e.Database}}
		return slurmconf.SlurmdbdConfig(in), true
	}
	f.Fuzz(func(t *testing.T, host, user, database, password string) {
		got, ok := render(t, host, user, database, password)
		if !ok {
			return
		}
		want, ok := render(t, "db", "slurm", "slurm_acct_db", "pw")
		if !ok {
			t.Fatal("the harmless spec is refused")
		}
		fuzzspec.SameShape(t, "slurmdbd.conf", got, want)
		if !strings.Contains(got, "\nStoragePass="+password+"\n") {
			t.Fatalf("the password is not written as it is:\n%s", got)
		}
	})
}
