package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// The secure metrics endpoint, against a real API server: no token, a token of a service
// account without the metrics-reader rule, and one with it.
func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server")
	}
	env, admin, _, err := kube.StartEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(env.Config)

	ns := "monitoring"
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	token := func(name string) string {
		must(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		must(t, err)
		return tr.Status.Token
	}
	reader, stranger := token("prometheus"), token("stranger")
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}))
	must(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}))

	for _, secure := range []bool{true, false} {
		addr := freeAddr(t)
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: kube.Scheme(), Metrics: metricsOptions(addr, secure), HealthProbeBindAddress: "0"})
		must(t, err)
		mctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()

		scheme := "http"
		if secure {
			scheme = "https"
		}
		get := func(bearer string) (int, string) {
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s/metrics", scheme, addr), nil)
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			for {
				resp, err := c.Do(req)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					return resp.StatusCode, string(b)
				}
				if ctx.Err() != nil {
					t.Fatalf("metrics never answered: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		if secure {
			if code, _ := get(""); code != http.StatusUnauthorized {
				t.Errorf("no token: %d, want 401", code)
			}
			// controller-runtime's filter answers 500 here: what matters is that nothing leaks.
			if code, body := get("not-a-token"); code == http.StatusOK || strings.Contains(body, "# HELP") {
				t.Errorf("a bad token got the metrics: %d", code)
			}
			if code, _ := get(stranger); code != http.StatusForbidden {
				t.Errorf("a token without the metrics-reader rule: %d, want 403", code)
			}
			if code, body := get(reader); code != http.StatusOK || !strings.Contains(body, "# HELP") {
				t.Errorf("the metrics reader: %d %.200q", code, body)
			}
		} else if code, body := get(""); code != http.StatusOK || !strings.Contains(body, "# HELP") {
			t.Errorf("insecure, no token: %d %.200q", code, body)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
