// Package kube starts a real API server (envtest, with the binaries hack/test-assets.sh builds)
// for tests, and finds the kubectl that matches it. It is for tests only.
package kube

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// Scheme knows the built-in kinds and SlurmCluster.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = slurmv1alpha1.AddToScheme(s)
	return s
}

// StartEnv starts etcd and kube-apiserver with the CRDs in crdDirs installed. It returns the
// environment (Stop it), a client with the project's scheme, and the path of an admin
// kubeconfig for kubectl.
func StartEnv(crdDirs []string) (*envtest.Environment, client.Client, string, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, "", errors.New("KUBEBUILDER_ASSETS is not set: run the tests with 'make test' (hack/test-assets.sh builds the API server)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, "", fmt.Errorf("start api server: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, nil, "", fmt.Errorf("client: %w", err)
	}
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, nil, "", fmt.Errorf("add admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		_ = env.Stop()
		return nil, nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	f, err := os.CreateTemp("", "slurm-operator-kubeconfig-*")
	if err != nil {
		_ = env.Stop()
		return nil, nil, "", err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		_ = env.Stop()
		return nil, nil, "", err
	}
	return env, c, f.Name(), nil
}

// Kubectl finds kubectl: $KUBECTL, then the one built beside the API server, then $PATH.
func Kubectl() (string, error) {
	if p := os.Getenv("KUBECTL"); p != "" {
		return p, nil
	}
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		p := filepath.Join(dir, "kubectl")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return exec.LookPath("kubectl")
}
