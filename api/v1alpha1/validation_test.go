package v1alpha1_test

import (
	"os"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/crdvalidate"
)

// These tests validate manifests against the generated CRD in process: the same defaulting,
// schema, list-type and CEL checks the API server runs, without starting one. envtest_test.go
// repeats the cases against a real API server.

func loadValidator(t *testing.T) *crdvalidate.Validator {
	t.Helper()
	v, err := crdvalidate.Load(crdPath, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTheBaseManifestIsValid(t *testing.T) {
	if errs := loadValidator(t).Validate(baseManifest(), nil); len(errs) > 0 {
		t.Fatalf("base manifest rejected: %v", errs.ToAggregate())
	}
}

func TestEverySampleIsValid(t *testing.T) {
	v := loadValidator(t)
	paths, err := samplePaths()
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(data, &obj); err != nil {
				t.Fatal(err)
			}
			if errs := v.Validate(obj, nil); len(errs) > 0 {
				t.Fatalf("sample rejected: %v", errs.ToAggregate())
			}
			// The sample must also decode into the Go types without unknown fields.
			var typed slurmv1alpha1.SlurmCluster
			if err := yaml.UnmarshalStrict(data, &typed); err != nil {
				t.Fatalf("sample does not match the Go types: %v", err)
			}
		})
	}
}

func TestEverySeedSnippetIsValid(t *testing.T) {
	v := loadValidator(t)
	manifests, err := seedManifests()
	if err != nil {
		t.Fatal(err)
	}
	for name, obj := range manifests {
		t.Run(name, func(t *testing.T) {
			if errs := v.Validate(obj, nil); len(errs) > 0 {
				t.Fatalf("seed snippet rejected: %v", errs.ToAggregate())
			}
		})
	}
}

func TestInvalidManifestsAreRejectedWithTheFieldNamed(t *testing.T) {
	v := loadValidator(t)
	cases := invalidCases()
	if len(cases) < 25 {
		t.Fatalf("want at least 25 invalid cases, have %d", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := baseManifest()
			tc.edit(obj)
			errs := v.Validate(obj, nil)
			if !namesField(errs, tc.field, tc.reason) {
				t.Fatalf("want an error on %s mentioning %q, got: %v", tc.field, tc.reason, errs.ToAggregate())
			}
		})
	}
}

func TestClusterNameIsImmutable(t *testing.T) {
	v := loadValidator(t)
	old := baseManifest()
	updated := baseManifest()
	setTo("spec.clusterName", "renamed")(updated)
	if errs := v.Validate(updated, old); !namesField(errs, "spec.clusterName", "immutable") {
		t.Fatalf("want clusterName immutable, got: %v", errs.ToAggregate())
	}
	same := baseManifest()
	setTo("spec.slurmNodes.worker.size", 5)(same)
	if errs := v.Validate(same, baseManifest()); len(errs) > 0 {
		t.Fatalf("an update that keeps clusterName was rejected: %v", errs.ToAggregate())
	}
}

func TestDefaultsAreFilledIn(t *testing.T) {
	v := loadValidator(t)
	obj := baseManifest()
	v.Default(obj)
	var sc slurmv1alpha1.SlurmCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &sc); err != nil {
		t.Fatal(err)
	}
	n := sc.Spec.SlurmNodes
	checks := map[string]bool{
		"controller size 1":        n.Controller.Size == 1,
		"sshd port 22":             n.Login.Sshd.Port == 22,
		"login Service type":       n.Login.Service.Type == "LoadBalancer",
		"accounting off":           !n.Accounting.Enabled,
		"worker image set":         sc.Spec.Images.Worker != "",
		"pull policy IfNotPresent": sc.Spec.Images.PullPolicy == "IfNotPresent",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("default missing: %s", what)
		}
	}
}

// namesField reports whether one error is on the field (or mentions it) and carries the reason.
func namesField(errs field.ErrorList, fieldPath, reason string) bool {
	for _, e := range errs {
		text := e.Error()
		if (e.Field == fieldPath || strings.Contains(text, fieldPath)) && strings.Contains(text, reason) {
			return true
		}
	}
	return false
}

// A StatefulSet's claim templates cannot change: the spool's template is refused at admission
// instead of making every later apply of the worker StatefulSet fail.
func TestSpoolClaimTemplateIsImmutable(t *testing.T) {
	v := loadValidator(t)
	withSpool := func(size string) map[string]any {
		m := baseManifest()
		setTo("spec.slurmNodes.worker.volumes.spool", map[string]any{"volumeClaimTemplateSpec": map[string]any{
			"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": size}}}})(m)
		return m
	}
	if errs := v.Validate(withSpool("20Gi"), withSpool("10Gi")); !namesField(errs, "spec.slurmNodes.worker.volumes.spool.volumeClaimTemplateSpec", "immutable") {
		t.Fatalf("a grown claim template: %v", errs.ToAggregate())
	}
	toSource := baseManifest()
	setTo("spec.slurmNodes.worker.volumes.spool", map[string]any{"volumeSourceName": "data"})(toSource)
	if errs := v.Validate(toSource, withSpool("10Gi")); !namesField(errs, "spec.slurmNodes.worker.volumes.spool", "cannot switch") {
		t.Fatalf("a switch to a volume source: %v", errs.ToAggregate())
	}
	if errs := v.Validate(withSpool("10Gi"), withSpool("10Gi")); len(errs) > 0 {
		t.Fatalf("an unchanged template is refused: %v", errs.ToAggregate())
	}
}

// A backup slurmctld with one shared ReadWriteMany spool (a volume source) is accepted.
func TestABackupControllerWithASharedSpoolIsValid(t *testing.T) {
	v := loadValidator(t)
	obj := baseManifest()
	setTo("spec.slurmNodes.controller.size", 2)(obj)
	setTo("spec.slurmNodes.controller.volumes.spool", map[string]any{"volumeSourceName": "data"})(obj)
	if errs := v.Validate(obj, nil); len(errs) > 0 {
		t.Fatalf("a backup controller on a shared spool was refused: %v", errs.ToAggregate())
	}
}

// Admission takes a backup schedule exactly when the CronJob API's parser does (robfig/cron's
// standard parser), but for a range whose start is after its end, which only the parser sees
// (the operator reports it when it renders).
func TestBackupSchedulesAreRefusedWhereCronRefusesThem(t *testing.T) {
	v := loadValidator(t)
	for _, schedule := range []string{
		"0 3 * * *", "*/15 0-6 1,15 JAN-MAR mon-fri", "5/15 * * * *", "0 0 ? * ?", "00 03 * * *",
		"0 0 * * SUN-SAT", "30 2 * * 1-5", "0 0 1,15,31 */2 0", "59 23 31 12 6", "@daily", "@hourly",
		"61 3 * * *", "0 24 * * *", "0 0 0 * *", "0 0 32 * *", "0 0 * 13 *", "0 0 * * 7", "1-59/0 * * * *",
		"0 3 * * * *", "a b c d e", "0 3 * * MONDAY", "-1 3 * * *", "0 3 * JANUARY *",
	} {
		obj := baseManifest()
		setTo("spec.backups", map[string]any{"schedule": schedule, "volumeSourceName": "data"})(obj)
		_, cronErr := cron.ParseStandard(schedule)
		errs := v.Validate(obj, nil)
		if (len(errs) == 0) != (cronErr == nil) {
			t.Errorf("schedule %q: admission says %v, cron's parser %v", schedule, errs.ToAggregate(), cronErr)
		}
	}
}
