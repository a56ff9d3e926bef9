package v1alpha1_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// This suite runs the API's validation against a real kube-apiserver and etcd (built by
// hack/test-assets.sh), and drives the user's workflow with the real kubectl.

var (
	testEnv    *envtest.Environment
	k8sClient  client.Client
	kubeconfig string
	kubectl    string
)

func TestAPIOnARealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server; run without -short")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "SlurmCluster API on a real API server")
}

var _ = BeforeSuite(func() {
	var err error
	testEnv, k8sClient, kubeconfig, err = kube.StartEnv([]string{filepath.Join("..", "..", "config", "crd", "bases")})
	Expect(err).NotTo(HaveOccurred())
	kubectl, err = kube.Kubectl()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	_ = os.Remove(kubeconfig)
})

func create(ctx context.Context, obj map[string]any, ns string) error {
	u := &unstructured.Unstructured{Object: obj}
	u.SetNamespace(ns)
	return k8sClient.Create(ctx, u)
}

var _ = Describe("the SlurmCluster CRD", func() {
	It("is installed and served", func(ctx SpecContext) {
		list := &slurmv1alpha1.SlurmClusterList{}
		Expect(k8sClient.List(ctx, list)).To(Succeed())
	})

	It("accepts every sample in config/samples", func(ctx SpecContext) {
		paths, err := samplePaths()
		Expect(err).NotTo(HaveOccurred())
		Expect(paths).NotTo(BeEmpty())
		for _, p := range paths {
			data, err := os.ReadFile(p)
			Expect(err).NotTo(HaveOccurred())
			var obj map[string]any
			Expect(yaml.Unmarshal(data, &obj)).To(Succeed())
			Expect(create(ctx, obj, "default")).To(Succeed(), p)
		}
	})

	It("accepts a manifest built from each YAML snippet of the seed document", func(ctx SpecContext) {
		manifests, err := seedManifests()
		Expect(err).NotTo(HaveOccurred())
		Expect(manifests).To(HaveLen(5))
		for name, obj := range manifests {
			Expect(create(ctx, obj, "default")).To(Succeed(), name)
		}
	})

	DescribeTable("rejects an invalid manifest with a message that names the field",
		func(ctx SpecContext, tc invalidCase) {
			obj := baseManifest()
			tc.edit(obj)
			err := create(ctx, obj, "default")
			Expect(err).To(HaveOccurred(), "the API server accepted %s", tc.name)
			Expect(err.Error()).To(ContainSubstring(tc.field))
			Expect(err.Error()).To(ContainSubstring(tc.reason))
		},
		tableEntries(),
	)

	It("keeps clusterName immutable", func(ctx SpecContext) {
		obj := baseManifest()
		setTo("metadata.name", "immutable")(obj)
		Expect(create(ctx, obj, "default")).To(Succeed())
		sc := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "immutable"}, sc)).To(Succeed())
		sc.Spec.ClusterName = "renamed"
		err := k8sClient.Update(ctx, sc)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.clusterName"))
		Expect(err.Error()).To(ContainSubstring("immutable"))
	})

	It("keeps the worker spool's claim template as it was made", func(ctx SpecContext) {
		obj := baseManifest()
		setTo("metadata.name", "spool")(obj)
		setTo("spec.slurmNodes.worker.volumes.spool", map[string]any{"volumeClaimTemplateSpec": map[string]any{
			"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}}})(obj)
		Expect(create(ctx, obj, "default")).To(Succeed())
		sc := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "spool"}, sc)).To(Succeed())
		sc.Spec.SlurmNodes.Worker.Volumes.Spool.VolumeClaimTemplateSpec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("20Gi")
		err := k8sClient.Update(ctx, sc)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.slurmNodes.worker.volumes.spool.volumeClaimTemplateSpec"))
		Expect(err.Error()).To(ContainSubstring("immutable"))
	})

	It("takes elastic sets whose size is within their range, and fills in their timeouts", func(ctx SpecContext) {
		obj := baseManifest()
		setTo("metadata.name", "elastic")(obj)
		setTo("spec.slurmNodes.worker.autoscaling", map[string]any{"enabled": true, "minSize": 1, "maxSize": 8})(obj)
		setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "a100", "size": 0, "autoscaling": map[string]any{"enabled": true, "maxSize": 4}},
			map[string]any{"name": "cpu", "size": 9, "autoscaling": map[string]any{"enabled": false, "maxSize": 2}}})(obj)
		Expect(create(ctx, obj, "default")).To(Succeed())
		sc := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "elastic"}, sc)).To(Succeed())
		a := sc.Spec.SlurmNodes.NodeSets[0].Autoscaling
		Expect([]int32{a.IdleTimeoutSeconds, a.ResumeTimeoutSeconds}).To(Equal([]int32{600, 600}))
		Expect(sc.Spec.SlurmNodes.Worker.NodeCount()).To(Equal(int32(8)))
		// Off, the range does not bind the size.
		Expect(sc.WorkerSets()[2].Worker.NodeCount()).To(Equal(int32(9)))
	})

	It("fills in defaults on create", func(ctx SpecContext) {
		obj := baseManifest()
		setTo("metadata.name", "defaults")(obj)
		Expect(create(ctx, obj, "default")).To(Succeed())
		sc := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "defaults"}, sc)).To(Succeed())
		Expect(sc.Spec.SlurmNodes.Controller.Size).To(Equal(int32(1)))
		Expect(sc.Spec.SlurmNodes.Login.Sshd.Port).To(Equal(int32(22)))
		Expect(string(sc.Spec.SlurmNodes.Login.Service.Type)).To(Equal("LoadBalancer"))
	})

	// A toleration written without an operator keeps it empty: a default filled in here would
	// change the rendered pods of every cluster that wrote one so, and roll their workers.
	It("keeps a toleration's operator as written, and its pods' tolerations with it", func(ctx SpecContext) {
		obj := baseManifest()
		setTo("metadata.name", "tolerations")(obj)
		setTo("spec.k8sNodeFilters[0].tolerations", []any{map[string]any{"key": "dedicated", "value": "hpc", "effect": "NoSchedule"}})(obj)
		Expect(create(ctx, obj, "default")).To(Succeed())
		sc := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "tolerations"}, sc)).To(Succeed())
		Expect(sc.Spec.K8sNodeFilters[0].Tolerations).To(HaveLen(1))
		Expect(sc.Spec.K8sNodeFilters[0].Tolerations[0].Core()).To(Equal(corev1.Toleration{Key: "dedicated", Value: "hpc", Effect: corev1.TaintEffectNoSchedule}))
	})
})

var _ = Describe("kubectl against the API server", func() {
	It("explains spec.slurmNodes.worker.size from the field's doc comment", func(ctx SpecContext) {
		// The API server publishes a new CRD's OpenAPI a moment after the CRD is established.
		var out []byte
		Eventually(func() error {
			var err error
			out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig,
				"explain", "slurmcluster.spec.slurmNodes.worker.size").CombinedOutput()
			return err
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(string(out)).To(ContainSubstring("Size is the number of worker nodes"))
		Expect(string(out)).To(ContainSubstring("kubectl scale"))
	})

	It("scales the workers with kubectl scale", func(ctx SpecContext) {
		obj := baseManifest()
		setTo("metadata.name", "scaled")(obj)
		Expect(create(ctx, obj, "default")).To(Succeed())
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "-n", "default",
			"scale", "slurmcluster/scaled", "--replicas=5").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		sc := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "scaled"}, sc)).To(Succeed())
		Expect(sc.Spec.SlurmNodes.Worker.Size).To(Equal(int32(5)))
	})

	It("refuses kubectl scale beyond the allowed size, naming the field", func(ctx SpecContext) {
		obj := baseManifest()
		setTo("metadata.name", "toolarge")(obj)
		Expect(create(ctx, obj, "default")).To(Succeed())
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "-n", "default",
			"scale", "slurmcluster/toolarge", "--replicas=5000").CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("spec.slurmNodes.worker.size"))
	})
})

func tableEntries() []TableEntry {
	var entries []TableEntry
	for _, tc := range invalidCases() {
		entries = append(entries, Entry(tc.name, tc))
	}
	return entries
}
