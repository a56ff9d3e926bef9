package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// TestChartsInstallOnARealAPIServer lints both charts with the real helm and applies what they
// render, the way the seed document installs a cluster (helm install fpt-hpc ./ -n fpt-hpc).
func TestChartsInstallOnARealAPIServer(t *testing.T) {
	assets := realComponents(t, "needs helm and a real API server")
	helm := filepath.Join(assets, "helm")
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	operatorChart := filepath.Join(root, "charts", "slurm-operator")
	clusterChart := filepath.Join(root, "charts", "helm-slurm-cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = helmEnv(t)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// The cluster chart ships no root key and refuses to render without one (below); helm lint
	// only logs that refusal, so the chart is linted as an installer renders it, with a key.
	const rootKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVzZXJrZXl1c2Vya2V5dXNlcmtleXVzZXJrZXk= carol"
	keyValues := filepath.Join(t.TempDir(), "admin-keys.yaml")
	if err := os.WriteFile(keyValues, []byte("slurmNodes:\n  login:\n    sshRootPublicKeys:\n      - \""+rootKey+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("helm lint passes on both charts", func(t *testing.T) {
		if out, err := run(helm, "lint", "--strict", operatorChart); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if out, err := run(helm, "lint", "--strict", clusterChart, "-f", keyValues); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})

	t.Run("the cluster chart refuses to render without a root key, naming the value and how to give it", func(t *testing.T) {
		for name, args := range map[string][]string{
			"the chart's defaults": nil,
			"an empty list":        {"--set-json", "slurmNodes.login.sshRootPublicKeys=[]"},
		} {
			out, err := run(helm, append([]string{"template", "fpt-hpc", clusterChart, "-n", "fpt-hpc"}, args...)...)
			if err == nil {
				t.Errorf("%s: rendered without a root key:\n%s", name, out)
				continue
			}
			for _, want := range []string{"slurmNodes.login.sshRootPublicKeys is empty", "-f admin-keys.yaml", "--set"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: no %q in the error:\n%s", name, want, out)
				}
			}
		}
	})

	t.Run("the cluster chart renders the root keys given in a values file or with --set", func(t *testing.T) {
		for name, args := range map[string][]string{
			"a values file": {"-f", keyValues},
			"--set":         {"--set", "slurmNodes.login.sshRootPublicKeys[0]=" + rootKey},
		} {
			out, err := run(helm, append([]string{"template", "fpt-hpc", clusterChart, "-n", "fpt-hpc"}, args...)...)
			if err != nil {
				t.Errorf("%s: %v\n%s", name, err, out)
				continue
			}
			var sc slurmv1alpha1.SlurmCluster
			if err := yaml.Unmarshal([]byte(out[strings.Index(out, "apiVersion:"):]), &sc); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, out)
			}
			if keys := sc.Spec.SlurmNodes.Login.SSHRootPublicKeys; len(keys) != 1 || string(keys[0]) != rootKey {
				t.Errorf("%s: root keys %q", name, keys)
			}
		}
	})

	t.Run("values that break the CRD's schema are refused by helm, naming the field", func(t *testing.T) {
		out, err := run(helm, "template", "fpt-hpc", clusterChart, "-n", "fpt-hpc", "--set", "slurmNodes.worker.size=-1")
		if err == nil || !strings.Contains(out, "/slurmNodes/worker/size") {
			t.Fatalf("want a schema error on slurmNodes.worker.size, got %v:\n%s", err, out)
		}
	})

	_, c, kubeconfig, kubectl := apiServer(ctx, t, nil, "slurm-system", "fpt-hpc")
	apply := func(manifest string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
	}

	t.Run("the operator chart installs the CRD, RBAC and the manager", func(t *testing.T) {
		out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--include-crds")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		apply(out)
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm-system", Name: "slurm-operator"}, d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Spec.ServiceAccountName != "slurm-operator" {
			t.Fatalf("manager runs as %q", d.Spec.Template.Spec.ServiceAccountName)
		}
		if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--metrics-insecure=false") || strings.Contains(args, "--allowed-hostpath-prefixes") {
			t.Fatalf("manager args: %s", args)
		}
		// Two replicas, one elected: a stopped manager (an upgrade, a drained node) is taken
		// over at once (cmd/manager's leader election test).
		if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || !strings.Contains(args, "--leader-elect=true") {
			t.Fatalf("replicas %d (nil: 1), manager args: %s", ptr.Deref(d.Spec.Replicas, 1), args)
		}
	})

	t.Run("the operator chart refuses more than one replica without leader election", func(t *testing.T) {
		out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--set", "leaderElection.enabled=false")
		if err == nil || !strings.Contains(out, "leaderElection.enabled") {
			t.Fatalf("want a refusal naming leaderElection.enabled, got %v:\n%s", err, out)
		}
		out, err = run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
		if err != nil || !strings.Contains(out, "--leader-elect=false") || !strings.Contains(out, "replicas: 1\n") {
			t.Fatalf("one replica without leader election: %v\n%s", err, out)
		}
	})

	t.Run("the operator chart's policy values become the manager's flags", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(values, []byte("policy:\n  allowedImagePrefixes: [registry.example.com/hpc/]\n  allowedHostPathPrefixes: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "-f", values)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, want := range []string{"--allowed-image-prefixes=registry.example.com/hpc/", "--allowed-hostpath-prefixes=none"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %s in:\n%s", want, out)
			}
		}
	})

	t.Run("the operator chart's image.pullSecrets reach the manager's pod, and none by default", func(t *testing.T) {
		out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--show-only", "templates/deployment.yaml", "--set", "image.pullSecrets={regcred,mirror}")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Spec.ImagePullSecrets; len(got) != 2 || got[0].Name != "regcred" || got[1].Name != "mirror" {
			t.Errorf("imagePullSecrets: %v", got)
		}
		if out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--show-only", "templates/deployment.yaml"); err != nil || strings.Contains(out, "imagePullSecrets") {
			t.Errorf("by default: %v\n%s", err, out)
		}
	})

	t.Run("the operator chart pins image.digest after the tag, and refuses a value that is not a digest", func(t *testing.T) {
		const digest = "sha256:8ca1c5e7d260b5127c35c3389e549bee7532b0870732b6b32b61bc86db21506d"
		out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--show-only", "templates/deployment.yaml",
			"--set", "image.repository=registry.example.com/hpc/slurm-operator", "--set", "image.digest="+digest)
		if err != nil || !strings.Contains(out, `image: "registry.example.com/hpc/slurm-operator:0.1.0@`+digest+`"`) {
			t.Fatalf("a pinned digest: %v\n%s", err, out)
		}
		if out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--show-only", "templates/deployment.yaml"); err != nil || strings.Contains(out, "@sha256") {
			t.Errorf("by default the image is pulled by tag: %v\n%s", err, out)
		}
		for _, bad := range []string{"8ca1c5e7d260b5127c35c3389e549bee7532b0870732b6b32b61bc86db21506d", "sha256:abc", "latest"} {
			out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--set", "image.digest="+bad)
			if err == nil || !strings.Contains(out, "image.digest") {
				t.Errorf("image.digest=%s: want a refusal naming image.digest, got %v:\n%s", bad, err, out)
			}
		}
	})

	t.Run("the operator may patch nodes only when outOfServiceTaintAfter asks for the taint", func(t *testing.T) {
		out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system")
		if err != nil || strings.Contains(out, "out-of-service") {
			t.Fatalf("by default: %v, or an out-of-service flag or role:\n%s", err, out)
		}
		out, err = run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--set", "outOfServiceTaintAfter=10m")
		if err != nil || !strings.Contains(out, "--out-of-service-taint-after=10m") ||
			!strings.Contains(out, "name: slurm-operator-out-of-service\n") || !strings.Contains(out, "verbs: [patch]") {
			t.Fatalf("with outOfServiceTaintAfter=10m: %v\n%s", err, out)
		}
	})

	t.Run("the operator chart's monitoring values ship the dashboard in a ConfigMap Grafana's sidecar loads, and the alerts as a PrometheusRule", func(t *testing.T) {
		out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system", "--show-only", "templates/monitoring.yaml",
			"--set", "monitoring.grafanaDashboard.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
			"--set", "monitoring.prometheusRule.labels.release=kube-prometheus-stack")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var rule struct {
			Kind     string
			Metadata struct{ Labels map[string]string }
			Spec     map[string]any
		}
		var dashboard string
		for _, doc := range strings.Split(out, "\n---\n") {
			switch {
			case strings.Contains(doc, "kind: PrometheusRule"):
				if err := yaml.Unmarshal([]byte(doc), &rule); err != nil {
					t.Fatal(err)
				}
			case strings.Contains(doc, "kind: ConfigMap"):
				apply(doc)
				cm := &corev1.ConfigMap{}
				if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm-system", Name: "slurm-operator-dashboard"}, cm); err != nil {
					t.Fatal(err)
				}
				if cm.Labels["grafana_dashboard"] != "1" {
					t.Errorf("dashboard labels: %v", cm.Labels)
				}
				dashboard = cm.Data["slurm-cluster.json"]
			}
		}
		file, err := os.ReadFile(filepath.Join(operatorChart, "files", "grafana-dashboard.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid([]byte(dashboard)) || strings.TrimSpace(dashboard) != strings.TrimSpace(string(file)) {
			t.Errorf("the ConfigMap's dashboard is not the chart's file (%d bytes, valid JSON %t)", len(dashboard), json.Valid([]byte(dashboard)))
		}
		var want map[string]any
		rules, err := os.ReadFile(filepath.Join(operatorChart, "files", "prometheus-rules.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(rules, &want); err != nil {
			t.Fatal(err)
		}
		if rule.Kind != "PrometheusRule" || rule.Metadata.Labels["release"] != "kube-prometheus-stack" || !reflect.DeepEqual(rule.Spec, want) {
			t.Errorf("the PrometheusRule (kind %q, labels %v) does not hold the chart's rules file", rule.Kind, rule.Metadata.Labels)
		}
		if out, err := run(helm, "template", "slurm-operator", operatorChart, "-n", "slurm-system"); err != nil || strings.Contains(out, "PrometheusRule") || strings.Contains(out, "grafana_dashboard") {
			t.Errorf("monitoring objects rendered with the defaults (off): %v", err)
		}
	})

	t.Run("the cluster chart, with the seed's values changed by --set, makes a valid SlurmCluster", func(t *testing.T) {
		// The CRD from the operator chart must be served before the cluster chart applies.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if err := c.List(ctx, &slurmv1alpha1.SlurmClusterList{}); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("CRD not served: %v", err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		out, err := run(helm, "template", "fpt-hpc", clusterChart, "-n", "fpt-hpc",
			"--set", "slurmNodes.worker.size=16",
			"--set", "slurmNodes.login.sshRootPublicKeys[0]="+rootKey)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		apply(out)
		sc := &slurmv1alpha1.SlurmCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "fpt-hpc", Name: "fpt-hpc"}, sc); err != nil {
			t.Fatal(err)
		}
		if sc.Spec.SlurmNodes.Worker.Size != 16 || len(sc.Spec.SlurmNodes.Login.SSHRootPublicKeys) != 1 {
			t.Fatalf("values not applied: size %d, keys %v", sc.Spec.SlurmNodes.Worker.Size, sc.Spec.SlurmNodes.Login.SSHRootPublicKeys)
		}
	})
}

// helmEnv keeps helm's cache, configuration and data in the test's temporary folders.
func helmEnv(t *testing.T) []string {
	return append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
}

// realComponents skips the test under -short (it says why) and otherwise demands the API server,
// etcd, kubectl and helm that hack/test-assets.sh builds; it returns their folder.
func realComponents(t *testing.T, why string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(why + "; run without -short")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with 'make test'")
	}
	return assets
}
