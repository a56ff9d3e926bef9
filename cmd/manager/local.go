package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// localPlane is a local control plane (etcd and kube-apiserver from KUBEBUILDER_ASSETS, as
// hack/test-assets.sh builds them) with the CRDs installed, for the demo.
type localPlane struct {
	env        *envtest.Environment
	kubeconfig string
	kubectl    string
}

func startLocalPlane(crdDir, kubeconfigPath string, scheme *runtime.Scheme) (*localPlane, *rest.Config, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, nil, errors.New("--local needs KUBEBUILDER_ASSETS (run 'make demo', which builds the binaries)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("start local control plane: %w", err)
	}
	user, err := env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, nil, fmt.Errorf("add admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(kubeconfigPath), 0o755); err == nil {
			err = os.WriteFile(kubeconfigPath, data, 0o600)
		}
	}
	if err != nil {
		_ = env.Stop()
		return nil, nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	kubectl := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		kubectl = "kubectl"
	}
	return &localPlane{env: env, kubeconfig: kubeconfigPath, kubectl: kubectl}, cfg, nil
}

func (p *localPlane) stop() error { return p.env.Stop() }

// applyDemo creates the namespace and the sample SlurmCluster of the demo.
func applyDemo(ctx context.Context, c client.Client, samplePath, namespace string) (*slurmv1alpha1.SlurmCluster, error) {
	data, err := os.ReadFile(samplePath)
	if err != nil {
		return nil, err
	}
	sc := &slurmv1alpha1.SlurmCluster{}
	if err := yaml.UnmarshalStrict(data, sc); err != nil {
		return nil, fmt.Errorf("%s: %w", samplePath, err)
	}
	sc.Namespace = namespace
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err := c.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return sc, nil
}

// showDemo waits until the operator has reconciled the sample, then prints what an admin
// wants to see: kubectl get slurmcluster, the objects created, and the rendered slurm.conf.
func (p *localPlane) showDemo(ctx context.Context, c client.Client, sc *slurmv1alpha1.SlurmCluster, out io.Writer) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		cur := &slurmv1alpha1.SlurmCluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sc), cur); err != nil {
			return err
		}
		if cur.Status.ObservedGeneration == cur.Generation && len(cur.Status.Conditions) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the operator did not reconcile the demo cluster within 60s")
		}
		time.Sleep(500 * time.Millisecond)
	}
	ns := sc.Namespace
	sections := []struct {
		title string
		args  []string
	}{
		{"kubectl get slurmcluster", []string{"get", "slurmcluster", "-n", ns}},
		{"kubectl get statefulsets,deployments,services,configmaps,secrets,jobs", []string{"get", "statefulsets,deployments,services,configmaps,secrets,jobs", "-n", ns, "-l", "app.kubernetes.io/instance=" + sc.Name}},
		{"conditions", []string{"get", "slurmcluster", sc.Name, "-n", ns, "-o", `jsonpath={range .status.conditions[*]}{.type}={.status} ({.reason}) {.message}{"\n"}{end}`}},
		{"the rendered slurm.conf (generated part)", []string{"get", "configmap", sc.ConfigMapName(), "-n", ns, "-o", `jsonpath={.data.slurm-base\.conf}`}},
	}
	for _, s := range sections {
		fmt.Fprintf(out, "\n$ %s\n", s.title)
		cmd := exec.CommandContext(ctx, p.kubectl, append([]string{"--kubeconfig", p.kubeconfig}, s.args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %s: %w: %s", strings.Join(s.args, " "), err, b)
		}
		out.Write(b)
	}
	fmt.Fprintf(out, "\nThe local control plane keeps running. Explore it with:\n  export KUBECONFIG=%s\n  kubectl get slurmcluster -n %s\n  kubectl scale slurmcluster/%s -n %s --replicas=16\nPress Ctrl-C to stop (with --local-once the demo exits now).\n", p.kubeconfig, ns, sc.Name, ns)
	return nil
}
