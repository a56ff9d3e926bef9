package render_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/login"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/fuzzspec"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/golden"
)

// Each sample renders to one golden file per component: testdata/<sample>/<component>.golden.
// Run 'make golden' (go test ./internal/render/... -update) after a deliberate change.

var samples = []string{
	"slurm_v1alpha1_slurmcluster",
	"slurm_v1alpha1_slurmcluster_minimal",
	"slurm_v1alpha1_slurmcluster_externaldb",
	"slurm_v1alpha1_slurmcluster_nodesets",
	"slurm_v1alpha1_slurmcluster_directory",
}

// renderSample renders config/samples/NAME.yaml with the fixtures' keys.
func renderSample(t *testing.T, name string) []render.Part {
	t.Helper()
	sc, err := fixtures.Sample(name)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := render.All(fixtures.Input(sc))
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

func TestEveryComponentMatchesItsGoldenFile(t *testing.T) {
	for _, name := range samples {
		t.Run(name, func(t *testing.T) {
			for _, p := range renderSample(t, name) {
				var b bytes.Buffer
				for _, o := range p.Objects {
					y, err := yaml.Marshal(o)
					if err != nil {
						t.Fatal(err)
					}
					b.WriteString("---\n")
					b.Write(y)
				}
				golden.Check(t, filepath.Join("testdata", name, string(p.Component)+".golden"), b.Bytes())
			}
		})
	}
}

func TestRenderingIsDeterministic(t *testing.T) {
	sc, err := fixtures.Sample(samples[0])
	if err != nil {
		t.Fatal(err)
	}
	first := dump(t, fixtures.Input(sc))
	for i := 0; i < 20; i++ {
		if got := dump(t, fixtures.Input(sc)); got != first {
			t.Fatalf("render %d differs from the first", i)
		}
	}
}

func dump(t *testing.T, in base.Input) string {
	t.Helper()
	parts, err := render.All(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, p := range parts {
		for _, o := range p.Objects {
			y, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s\n", y)
		}
	}
	return b.String()
}

// Every Slurm pod runs without a service account token and with the default seccomp profile,
// and every container that is not privileged cannot gain privileges (docs/security.md).
func TestEveryPodIsHardened(t *testing.T) {
	for _, name := range samples {
		for _, p := range renderSample(t, name) {
			for _, o := range p.Objects {
				var pod *corev1.PodSpec
				switch v := o.(type) {
				case *appsv1.StatefulSet:
					pod = &v.Spec.Template.Spec
				case *batchv1.Job:
					pod = &v.Spec.Template.Spec
				default:
					continue
				}
				where := name + " " + o.GetName()
				if ptr.Deref(pod.AutomountServiceAccountToken, true) || pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil ||
					pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: token or seccomp not set", where)
				}
				for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
					privileged := c.SecurityContext != nil && (ptr.Deref(c.SecurityContext.Privileged, false) || c.SecurityContext.Capabilities != nil && slices.Contains(c.SecurityContext.Capabilities.Add, "SYS_ADMIN"))
					if !privileged && (c.SecurityContext == nil || ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true)) {
						t.Errorf("%s: container %s may gain privileges", where, c.Name)
					}
				}
			}
		}
	}
}

// The rendered worker count is an input of its own (leaving workers are kept while they
// drain): the spec, the user's target, is not rewritten to carry it.
func TestTheRenderedWorkerCountIsAnInput(t *testing.T) {
	sc, err := fixtures.Sample(samples[0])
	if err != nil {
		t.Fatal(err)
	}
	in := fixtures.Input(sc)
	target := in.Cluster.Spec.SlurmNodes.Worker.Size
	keep := target + 2
	in.Workers = &keep
	parts, err := render.All(in)
	if err != nil {
		t.Fatal(err)
	}
	var replicas int32
	var conf string
	for _, p := range parts {
		for _, o := range p.Objects {
			switch v := o.(type) {
			case *appsv1.StatefulSet:
				if v.Name == sc.ComponentName("worker") {
					replicas = ptr.Deref(v.Spec.Replicas, -1)
				}
			case *corev1.ConfigMap:
				conf += v.Data["slurm-base.conf"]
			}
		}
	}
	if replicas != keep || !strings.Contains(conf, fmt.Sprintf("NodeName=worker-[0-%d]", keep-1)) {
		t.Fatalf("rendered %d workers, slurm.conf:\n%s", replicas, conf)
	}
	if in.Cluster.Spec.SlurmNodes.Worker.Size != target {
		t.Fatalf("the spec's size became %d", in.Cluster.Spec.SlurmNodes.Worker.Size)
	}
}

// base.WithDefaults fills in what the CRD's defaults fill in: a SlurmCluster renders the same
// whether it came through the API server (schema defaults applied) or not (in-memory defaults
// alone), for every sample.
func TestInMemoryDefaultsAgreeWithTheCRD(t *testing.T) {
	all, err := fixtures.SampleNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range all {
		t.Run(name, func(t *testing.T) {
			raw, err := fixtures.Sample(name)
			if err != nil {
				t.Fatal(err)
			}
			admitted, ok := fuzzspec.New(t, name).Accepted(t, func(map[string]any) {})
			if !ok {
				t.Fatal("the sample is refused")
			}
			admitted.Namespace = raw.Namespace
			if got, want := dump(t, fixtures.Input(raw)), dump(t, fixtures.Input(admitted)); got != want {
				t.Fatalf("rendered differently without the CRD's defaults:\n%s", firstDiff(got, want))
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d: in-memory %q, CRD %q", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(al), len(bl))
}

// podAnnotations reach the worker and login pods (a secondary network is attached by one), and
// the rendered objects do not share the spec's map.
func TestPodAnnotationsReachTheWorkerAndLoginPods(t *testing.T) {
	sc, err := fixtures.Sample(samples[0])
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.SlurmNodes.Worker.PodAnnotations = map[string]string{"k8s.v1.cni.cncf.io/networks": "rdma-net"}
	sc.Spec.SlurmNodes.Login.PodAnnotations = map[string]string{"sidecar.istio.io/inject": "false"}
	in := fixtures.Input(sc)
	w, err := worker.StatefulSet(in, in.Cluster.WorkerSets()[0])
	if err != nil {
		t.Fatal(err)
	}
	l, err := login.StatefulSet(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"]; got != "rdma-net" {
		t.Errorf("worker template annotations: %v", w.Spec.Template.Annotations)
	}
	if got := l.Spec.Template.Annotations["sidecar.istio.io/inject"]; got != "false" {
		t.Errorf("login template annotations: %v", l.Spec.Template.Annotations)
	}
	w.Spec.Template.Annotations["x"] = "y"
	if _, shared := sc.Spec.SlurmNodes.Worker.PodAnnotations["x"]; shared {
		t.Error("the worker template shares the spec's annotation map")
	}
}

// The installer's PriorityClass goes on the control-plane pods (slurmctld, slurmdbd, the
// MariaDB of mariadb-operator) and on no other.
func TestTheControlPlanePriorityClassIsTheControlPlanes(t *testing.T) {
	sc, err := fixtures.Sample(samples[0])
	if err != nil {
		t.Fatal(err)
	}
	in := fixtures.Input(sc)
	in.Optional.MariaDB = true
	in.ControlPlanePriorityClass = "slurm-control-plane"
	parts, err := render.All(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range parts {
		for _, o := range p.Objects {
			switch v := o.(type) {
			case *appsv1.StatefulSet:
				got[v.Name] = v.Spec.Template.Spec.PriorityClassName
			case *appsv1.Deployment:
				got[v.Name] = v.Spec.Template.Spec.PriorityClassName
			case *unstructured.Unstructured:
				if v.GetKind() == "MariaDB" {
					name, _, _ := unstructured.NestedString(v.Object, "spec", "priorityClassName")
					got[v.GetName()] = name
				}
			}
		}
	}
	want := map[string]string{
		sc.ComponentName("controller"): "slurm-control-plane", sc.ComponentName("accounting"): "slurm-control-plane",
		sc.MariaDBName(): "slurm-control-plane", sc.ComponentName("worker"): "", sc.ComponentName("login"): "", sc.ComponentName("exporter"): "",
	}
	for name, class := range want {
		if c, ok := got[name]; !ok || c != class {
			t.Errorf("%s: priority class %q (rendered %v), want %q", name, c, ok, class)
		}
	}
}

// spec.images.pullSecrets reach every pod of the cluster, the populate Job's and MariaDB's
// included, in their order.
func TestPullSecretsReachEveryPod(t *testing.T) {
	sc, err := fixtures.Sample(samples[0])
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Images.PullSecrets = []slurmv1alpha1.SecretName{{Name: "regcred"}, {Name: "mirror"}}
	in := fixtures.Input(sc)
	in.Optional.MariaDB = true
	parts, err := render.All(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}
	pods := 0
	for _, p := range parts {
		for _, o := range p.Objects {
			var got []corev1.LocalObjectReference
			switch v := o.(type) {
			case *appsv1.StatefulSet:
				got = v.Spec.Template.Spec.ImagePullSecrets
			case *appsv1.Deployment:
				got = v.Spec.Template.Spec.ImagePullSecrets
			case *batchv1.Job:
				got = v.Spec.Template.Spec.ImagePullSecrets
			case *unstructured.Unstructured:
				if v.GetKind() != "MariaDB" {
					continue
				}
				refs, _, _ := unstructured.NestedSlice(v.Object, "spec", "imagePullSecrets")
				for _, r := range refs {
					name, _, _ := unstructured.NestedString(r.(map[string]any), "name")
					got = append(got, corev1.LocalObjectReference{Name: name})
				}
			default:
				continue
			}
			pods++
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%T %s: imagePullSecrets %v, want %v", o, o.GetName(), got, want)
			}
		}
	}
	// controller, worker, login, accounting, exporter, populate Job, MariaDB
	if pods < 7 {
		t.Errorf("looked at %d pod templates, want every component's", pods)
	}
}
