// Package kube starts a real API server (envtest, with the binaries hack/test-assets.sh builds)
// for tests, and finds the kubectl that matches it. It is for tests only.
package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// Scheme knows the built-in kinds and SlurmCluster.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = slurmv1alpha1.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}

// StartEnv starts etcd and kube-apiserver with the CRDs in crdDirs installed. It returns the
// environment (Stop it), a client with the project's scheme, and the path of an admin
// kubeconfig for kubectl, removed by Stop.
// configure, when given, adjusts the environment before it starts (API server flags).
func StartEnv(crdDirs []string, configure ...func(*envtest.Environment)) (*envtest.Environment, client.Client, string, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, "", errors.New("KUBEBUILDER_ASSETS is not set: run the tests with 'make test' (hack/test-assets.sh builds the API server)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	// As OpenShift runs it: setting an owner reference that blocks the owner's deletion needs
	// the right to update the owner's finalizers.
	env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	for _, c := range configure {
		c(env)
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
	// In the API server's certificate folder, which envtest made and removes on Stop: no
	// admin kubeconfig outlives its API server.
	path := filepath.Join(env.ControlPlane.GetAPIServer().CertDir, "admin.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		_ = env.Stop()
		return nil, nil, "", err
	}
	return env, c, path, nil
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

// OperatorConfig returns a client config for a user bound to the operator's ClusterRole, as
// config/rbac/role.yaml (the file the chart's role is made from) grants it: a manager run with
// it can do exactly what the installed operator can.
func OperatorConfig(env *envtest.Environment, admin client.Client, roleFile string) (*rest.Config, error) {
	u, err := OperatorUser(env, admin, roleFile)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// OperatorUserName is the user the operator runs as in these tests (its ServiceAccount's).
const OperatorUserName = "system:serviceaccount:slurm-operator-system:slurm-operator"

// OperatorUser is OperatorConfig's user, for a kubeconfig of its own (a manager process).
func OperatorUser(env *envtest.Environment, admin client.Client, roleFile string) (*envtest.AuthenticatedUser, error) {
	data, err := os.ReadFile(roleFile)
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return nil, fmt.Errorf("%s: %w", roleFile, err)
	}
	ctx := context.Background()
	if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create the operator's ClusterRole: %w", err)
	}
	const user = OperatorUserName
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := admin.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("bind the operator's ClusterRole: %w", err)
	}
	return env.AddUser(envtest.User{Name: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
}
