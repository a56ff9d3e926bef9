package controller_test

import (
	"bytes"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// applySample creates the GPU sample (8 workers, 2 login, accounting, exporter) in ns.
func applySample(ctx SpecContext, ns, name string) *slurmv1alpha1.SlurmCluster {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	Expect(err).NotTo(HaveOccurred())
	sc.Namespace, sc.Name = ns, name
	Expect(k8sClient.Create(ctx, sc)).To(Succeed())
	return sc
}

func get[T client.Object](ctx SpecContext, obj T, ns, name string) T {
	Eventually(func() error { return k8sClient.Get(ctx, key(ns, name), obj) }).WithTimeout(timeout).Should(Succeed(), name)
	return obj
}

func slurmConf(ctx SpecContext, ns, name string) string {
	cm := get(ctx, &corev1.ConfigMap{}, ns, name+"-slurm-config")
	return cm.Data["slurm-base.conf"]
}

func ownedBy(obj client.Object, sc *slurmv1alpha1.SlurmCluster) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == sc.UID && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

var _ = Describe("reconciling a SlurmCluster", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("creates every object of the cluster, owned by it, with names, ports, volumes and resources", func(ctx SpecContext) {
		sc := applySample(ctx, ns, "fpt-hpc")
		Expect(k8sClient.Get(ctx, key(ns, "fpt-hpc"), sc)).To(Succeed())

		for _, s := range []string{"fpt-hpc-munge-key", "fpt-hpc-jwt-key", "fpt-hpc-ssh-host-keys", "fpt-hpc-slurmdbd-conf", "fpt-hpc-mariadb-password"} {
			Expect(ownedBy(get(ctx, &corev1.Secret{}, ns, s), sc)).To(BeTrue(), s)
		}
		for _, c := range []string{"fpt-hpc-slurm-config", "fpt-hpc-root-authorized-keys"} {
			Expect(ownedBy(get(ctx, &corev1.ConfigMap{}, ns, c), sc)).To(BeTrue(), c)
		}
		for _, s := range []string{"fpt-hpc-controller", "fpt-hpc-worker", "fpt-hpc-login", "fpt-hpc-login-headless", "fpt-hpc-accounting", "fpt-hpc-exporter"} {
			Expect(ownedBy(get(ctx, &corev1.Service{}, ns, s), sc)).To(BeTrue(), s)
		}
		login := get(ctx, &corev1.Service{}, ns, "fpt-hpc-login")
		Expect(login.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
		Expect(login.Spec.Ports[0].Port).To(Equal(int32(22)))
		Expect(get(ctx, &corev1.Service{}, ns, "fpt-hpc-worker").Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))

		workers := get(ctx, &appsv1.StatefulSet{}, ns, "fpt-hpc-worker")
		Expect(ownedBy(workers, sc)).To(BeTrue())
		Expect(*workers.Spec.Replicas).To(Equal(int32(8)))
		Expect(workers.Spec.ServiceName).To(Equal("fpt-hpc-worker"))
		slurmd := workers.Spec.Template.Spec.Containers[0]
		Expect(slurmd.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("nvidia.com/gpu"), resourceQty("8")))
		Expect(slurmd.Resources.Requests.Cpu().String()).To(Equal("100"))
		Expect(slurmd.Ports[0].ContainerPort).To(Equal(int32(6818)))
		Expect(workers.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Name", "jail-submount-mlcommons-sd-bench-data")))
		// Sub-mounts are mounted beside the jail and bound into it by the entrypoint: the kubelet
		// makes no mountpoint on the shared jail volume.
		Expect(slurmd.VolumeMounts).To(ContainElement(HaveField("MountPath", "/slurm-operator/submounts/mlcommons-sd-bench-data")))
		Expect(slurmd.Command).To(ContainElement("/slurm-operator/submounts/mlcommons-sd-bench-data:/mnt/data-hps"))
		for _, m := range slurmd.VolumeMounts {
			Expect(m.MountPath == "/mnt/jail" || !strings.HasPrefix(m.MountPath, "/mnt/jail/")).To(BeTrue(), m.MountPath)
		}
		Expect(workers.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("nvidia.com/gpu.present", "true"))
		Expect(workers.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(HaveValue(Equal("xplat-nfs")))
		Expect(workers.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled).To(Equal(appsv1.RetainPersistentVolumeClaimRetentionPolicyType))

		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "fpt-hpc-login").Spec.Replicas).To(Equal(int32(2)))
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "fpt-hpc-controller").Spec.Replicas).To(Equal(int32(1)))
		Expect(get(ctx, &appsv1.StatefulSet{}, ns, "fpt-hpc-accounting").Spec.Template.Annotations).To(HaveKey("slurm.hpc.dev/restart-hash"))
		Expect(get(ctx, &appsv1.Deployment{}, ns, "fpt-hpc-exporter").Spec.Template.Spec.Containers).To(HaveLen(1))
		job := &batchv1.Job{}
		Eventually(func() error { return k8sClient.Get(ctx, key(ns, sc.PopulateJailJobName()), job) }).WithTimeout(timeout).Should(Succeed())
		Expect(ownedBy(job, sc)).To(BeTrue())

		Expect(slurmConf(ctx, ns, "fpt-hpc")).To(ContainSubstring("NodeName=worker-[0-7] NodeAddr=fpt-hpc-worker-[0-7]"))

		By("reporting conditions with reasons, and the optional APIs that are missing")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "fpt-hpc"), sc)).To(Succeed())
			for _, t := range []string{"Available", "ControllerAvailable", "WorkersAvailable", "LoginAvailable", "AccountingAvailable", "JailPopulated", "Degraded"} {
				c := meta.FindStatusCondition(sc.Status.Conditions, t)
				g.Expect(c).NotTo(BeNil(), t)
				g.Expect(c.Reason).NotTo(BeEmpty(), t)
			}
			g.Expect(meta.FindStatusCondition(sc.Status.Conditions, "AccountingAvailable").Reason).To(Equal("MariaDBOperatorMissing"))
			g.Expect(meta.FindStatusCondition(sc.Status.Conditions, "Degraded").Message).To(ContainSubstring("ServiceMonitor"))
			g.Expect(sc.Status.ObservedGeneration).To(Equal(sc.Generation))
			g.Expect(sc.Status.Workers.Summary).To(Equal("0/8"))
			g.Expect(sc.Status.Workers.Selector).To(ContainSubstring("app.kubernetes.io/component=worker"))
			g.Expect(sc.Status.GPU).NotTo(BeNil())
		}).WithTimeout(timeout).Should(Succeed())
	})

	It("scales workers 8 → 16 without touching the controller, login or accounting pods", func(ctx SpecContext) {
		applySample(ctx, ns, "scale")
		ctl := get(ctx, &appsv1.StatefulSet{}, ns, "scale-controller")
		lgn := get(ctx, &appsv1.StatefulSet{}, ns, "scale-login")
		acc := get(ctx, &appsv1.StatefulSet{}, ns, "scale-accounting")
		Eventually(func() string { return slurmConf(ctx, ns, "scale") }).WithTimeout(timeout).Should(ContainSubstring("worker-[0-7]"))

		updateSpec(ctx, ns, "scale", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.Size = 16
		})

		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "scale-worker").Spec.Replicas
		}).WithTimeout(timeout).Should(Equal(int32(16)))
		Eventually(func() string { return slurmConf(ctx, ns, "scale") }).WithTimeout(timeout).Should(ContainSubstring("NodeName=worker-[0-15]"))
		Expect(slurmConf(ctx, ns, "scale")).To(ContainSubstring("PartitionName=main Nodes=worker-[0-15]"))
		Consistently(func(g Gomega) {
			for _, before := range []*appsv1.StatefulSet{ctl, lgn, acc} {
				now := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(before), now)).To(Succeed())
				g.Expect(now.Generation).To(Equal(before.Generation), before.Name)
				g.Expect(now.ResourceVersion).To(Equal(before.ResourceVersion), before.Name)
			}
		}).WithTimeout(3 * time.Second).Should(Succeed())
	})

	It("delivers a new SSH key without changing the login pod template", func(ctx SpecContext) {
		applySample(ctx, ns, "keys")
		lgn := get(ctx, &appsv1.StatefulSet{}, ns, "keys-login")
		newKey := slurmv1alpha1.SSHPublicKey("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG5ld2tleW5ld2tleW5ld2tleW5ld2tleW5ld2tleQ== carol")
		updateSpec(ctx, ns, "keys", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Login.SSHRootPublicKeys = append(sc.Spec.SlurmNodes.Login.SSHRootPublicKeys, newKey)
		})
		Eventually(func() string {
			return get(ctx, &corev1.ConfigMap{}, ns, "keys-root-authorized-keys").Data["root"]
		}).WithTimeout(timeout).Should(ContainSubstring("carol"))
		now := get(ctx, &appsv1.StatefulSet{}, ns, "keys-login")
		Expect(now.Generation).To(Equal(lgn.Generation))
		Expect(now.Spec.Template).To(Equal(lgn.Spec.Template))
	})

	It("brings back a deleted Service, ConfigMap and worker StatefulSet", func(ctx SpecContext) {
		applySample(ctx, ns, "heal")
		for _, obj := range []client.Object{
			get(ctx, &corev1.Service{}, ns, "heal-login"),
			get(ctx, &corev1.ConfigMap{}, ns, "heal-slurm-config"),
			get(ctx, &appsv1.StatefulSet{}, ns, "heal-worker"),
		} {
			uid := obj.GetUID()
			Expect(k8sClient.Delete(ctx, obj)).To(Succeed())
			Eventually(func() types.UID {
				fresh := obj.DeepCopyObject().(client.Object)
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
					return uid
				}
				return fresh.GetUID()
			}).WithTimeout(timeout).ShouldNot(Equal(uid), obj.GetName())
		}
	})

	It("keeps the munge key byte for byte across reconciles and an operator restart", func(ctx SpecContext) {
		applySample(ctx, ns, "munge")
		before := get(ctx, &corev1.Secret{}, ns, "munge-munge-key").Data["munge.key"]
		hostKeys := get(ctx, &corev1.Secret{}, ns, "munge-ssh-host-keys").Data
		Expect(before).To(HaveLen(1024))

		stopManager()
		startManager()
		updateSpec(ctx, ns, "munge", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.Size = 9 // force a reconcile that re-renders everything
		})
		Eventually(func() string { return slurmConf(ctx, ns, "munge") }).WithTimeout(timeout).Should(ContainSubstring("worker-[0-8]"))

		after := get(ctx, &corev1.Secret{}, ns, "munge-munge-key").Data["munge.key"]
		Expect(bytes.Equal(before, after)).To(BeTrue(), "the munge key changed")
		Expect(get(ctx, &corev1.Secret{}, ns, "munge-ssh-host-keys").Data).To(Equal(hostKeys))
	})

	It("makes no write when a reconcile finds nothing to change", func(ctx SpecContext) {
		sc := applySample(ctx, ns, "noop")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "noop"), sc)).To(Succeed())
			g.Expect(sc.Status.ObservedGeneration).To(Equal(sc.Generation))
		}).WithTimeout(timeout).Should(Succeed())
		// Let the running manager settle (nothing written for 2 s, however loaded the machine),
		// then reconcile again with a client that counts writes.
		Eventually(func(g Gomega) {
			first := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "noop"), first)).To(Succeed())
			time.Sleep(2 * time.Second)
			g.Expect(k8sClient.Get(ctx, key(ns, "noop"), sc)).To(Succeed())
			g.Expect(sc.ResourceVersion).To(Equal(first.ResourceVersion))
		}).WithTimeout(timeout).Should(Succeed())
		var writes atomic.Int64
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		r := &controller.SlurmClusterReconciler{
			Client:    countingClient(direct, &writes),
			APIReader: direct,
			Scheme:    k8sClient.Scheme(),
			Operator:  operatorPods,
		}
		for i := 0; i < 3; i++ {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key(ns, "noop")})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(writes.Load()).To(BeZero(), "a no-op reconcile wrote to the API server")

		By("and the same client does write when the spec changes")
		updateSpec(ctx, ns, "noop", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.Size = 9
		})
		_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: key(ns, "noop")})
		Expect(err).NotTo(HaveOccurred())
		Expect(writes.Load()).To(BeNumerically(">", 0))
	})

	It("runs the populate Job once, and again only when overwrite is asked for", func(ctx SpecContext) {
		sc := applySample(ctx, ns, "jail")
		Expect(k8sClient.Get(ctx, key(ns, "jail"), sc)).To(Succeed())
		first := get(ctx, &batchv1.Job{}, ns, sc.PopulateJailJobName())
		Expect(first.Spec.Template.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "OVERWRITE", Value: "false"}))

		By("marking the Job complete, as the Job controller would")
		Eventually(func() error {
			if err := k8sClient.Get(ctx, key(ns, first.Name), first); err != nil {
				return err
			}
			now := metav1.Now()
			first.Status.StartTime = &now
			first.Status.CompletionTime = &now
			first.Status.Succeeded = 1
			first.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
			return k8sClient.Status().Update(ctx, first)
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "jail"), sc)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(sc.Status.Conditions, "JailPopulated")).To(BeTrue())
		}).WithTimeout(timeout).Should(Succeed())

		By("changing something else: no second Job")
		updateSpec(ctx, ns, "jail", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 9 })
		Eventually(func() string { return slurmConf(ctx, ns, "jail") }).WithTimeout(timeout).Should(ContainSubstring("worker-[0-8]"))
		jobs := &batchv1.JobList{}
		Expect(k8sClient.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
		Expect(jobs.Items).To(HaveLen(1))

		By("asking for overwrite: it waits while login or worker pods exist")
		updateSpec(ctx, ns, "jail", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.PopulateJail.Overwrite = true
			sc.Spec.SlurmNodes.Login.Size = 0
		})
		// Slurm cannot be asked here, so the 9 workers stay (fail closed): the overwrite waits.
		// jail_overwrite_test.go follows it to the new Job.
		eventuallyCondition(ctx, ns, "jail", "JailPopulated", "OverwriteWaiting", "9 worker and 0 login pods")
		Expect(k8sClient.Get(ctx, key(ns, "jail"), sc)).To(Succeed())
		Expect(sc.PopulateJailJobName()).NotTo(Equal(first.Name))
		Expect(k8sClient.Get(ctx, key(ns, sc.PopulateJailJobName()), &batchv1.Job{})).NotTo(Succeed())
	})

	It("keeps two clusters in one namespace apart", func(ctx SpecContext) {
		a := applySample(ctx, ns, "alpha")
		b := applySample(ctx, ns, "beta")
		Expect(k8sClient.Get(ctx, key(ns, "alpha"), a)).To(Succeed())
		Expect(k8sClient.Get(ctx, key(ns, "beta"), b)).To(Succeed())
		wa := get(ctx, &appsv1.StatefulSet{}, ns, "alpha-worker")
		wb := get(ctx, &appsv1.StatefulSet{}, ns, "beta-worker")
		Expect(ownedBy(wa, a)).To(BeTrue())
		Expect(ownedBy(wb, b)).To(BeTrue())
		Expect(wa.Spec.Selector.MatchLabels).NotTo(Equal(wb.Spec.Selector.MatchLabels))
		ka := get(ctx, &corev1.Secret{}, ns, "alpha-munge-key").Data["munge.key"]
		kb := get(ctx, &corev1.Secret{}, ns, "beta-munge-key").Data["munge.key"]
		Expect(bytes.Equal(ka, kb)).To(BeFalse(), "two clusters share a munge key")
		Expect(slurmConf(ctx, ns, "alpha")).To(ContainSubstring("SlurmctldHost=alpha-controller-0"))
		Expect(slurmConf(ctx, ns, "beta")).To(ContainSubstring("SlurmctldHost=beta-controller-0"))
		Expect(strings.Contains(slurmConf(ctx, ns, "beta"), "alpha")).To(BeFalse())
	})
})

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }

// updateSpec edits a SlurmCluster's spec, retrying when the operator's status write raced it.
func updateSpec(ctx SpecContext, ns, name string, edit func(*slurmv1alpha1.SlurmCluster)) {
	Eventually(func() error {
		sc := &slurmv1alpha1.SlurmCluster{}
		if err := k8sClient.Get(ctx, key(ns, name), sc); err != nil {
			return err
		}
		edit(sc)
		return k8sClient.Update(ctx, sc)
	}).WithTimeout(timeout).Should(Succeed())
}

var _ = Describe("turning a component off", func() {
	It("deletes what the exporter and accounting left behind, and keeps every Secret", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "off")
		get(ctx, &appsv1.Deployment{}, ns, "off-exporter")
		get(ctx, &appsv1.StatefulSet{}, ns, "off-accounting")
		updateSpec(ctx, ns, "off", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Exporter.Enabled = false
			sc.Spec.SlurmNodes.Accounting.Enabled = false
		})
		gone := func(obj client.Object, name string) func() bool {
			return func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, name), obj)) }
		}
		Eventually(gone(&appsv1.Deployment{}, "off-exporter")).WithTimeout(timeout).Should(BeTrue())
		Eventually(gone(&corev1.Service{}, "off-exporter")).WithTimeout(timeout).Should(BeTrue())
		Eventually(gone(&appsv1.StatefulSet{}, "off-accounting")).WithTimeout(timeout).Should(BeTrue())
		Expect(slurmConf(ctx, ns, "off")).NotTo(ContainSubstring("AccountingStorageType"))
		for _, s := range []string{"off-munge-key", "off-slurmdbd-conf", "off-mariadb-password"} {
			Expect(k8sClient.Get(ctx, key(ns, s), &corev1.Secret{})).To(Succeed(), s)
		}
		get(ctx, &appsv1.StatefulSet{}, ns, "off-worker")
		Eventually(gone(&networkingv1.NetworkPolicy{}, "off-exporter")).WithTimeout(timeout).Should(BeTrue())
		Eventually(gone(&networkingv1.NetworkPolicy{}, "off-accounting")).WithTimeout(timeout).Should(BeTrue())
	})

	It("renders a NetworkPolicy per component by default, and deletes them all when they are turned off", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "np")
		Expect(k8sClient.Get(ctx, key(ns, "np"), sc)).To(Succeed())
		names := []string{"np-controller", "np-worker", "np-login", "np-accounting", "np-exporter"}
		for _, n := range names {
			Expect(ownedBy(get(ctx, &networkingv1.NetworkPolicy{}, ns, n), sc)).To(BeTrue(), n)
		}
		// The operator's own pods reach slurmrestd: the manager's flags name them.
		restd := get(ctx, &networkingv1.NetworkPolicy{}, ns, "np-controller").Spec.Ingress[1].From
		Expect(restd).To(ContainElement(HaveField("NamespaceSelector.MatchLabels", HaveKeyWithValue("kubernetes.io/metadata.name", "slurm-system"))))
		Expect(slurmConf(ctx, ns, "np")).To(ContainSubstring("SrunPortRange=60001-63000"))
		updateSpec(ctx, ns, "np", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.NetworkPolicies.Enabled = ptr.To(false) })
		for _, n := range names {
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, n), &networkingv1.NetworkPolicy{}))
			}).WithTimeout(timeout).Should(BeTrue(), n)
		}
		get(ctx, &appsv1.StatefulSet{}, ns, "np-worker")
	})
})

var _ = Describe("scaling workers down", func() {
	It("removes no worker while Slurm cannot be asked whether it runs a job", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "closed")
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "closed-worker").Spec.Replicas
		}).WithTimeout(timeout).Should(Equal(int32(8)))
		updateSpec(ctx, ns, "closed", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 5 })
		Eventually(func(g Gomega) {
			sc := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "closed"), sc)).To(Succeed())
			c := meta.FindStatusCondition(sc.Status.Conditions, "ScalingDown")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal("SlurmUnreachable"))
			g.Expect(sc.Status.Workers.Desired).To(Equal(int32(5)))
		}).WithTimeout(timeout).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "closed-worker").Spec.Replicas).To(Equal(int32(8)))
			g.Expect(slurmConf(ctx, ns, "closed")).To(ContainSubstring("NodeName=worker-[0-7]"))
		}).WithTimeout(3 * time.Second).Should(Succeed())

		By("going back up to 8: nothing to wait for any more")
		updateSpec(ctx, ns, "closed", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 8 })
		Eventually(func(g Gomega) {
			sc := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "closed"), sc)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(sc.Status.Conditions, "ScalingDown")).To(BeTrue())
		}).WithTimeout(timeout).Should(Succeed())
	})
})

var _ = Describe("an external accounting database", func() {
	It("writes a usable password into slurmdbd.conf, and keeps slurmdbd when the password turns unusable", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "slurm-db", Namespace: ns}, Data: map[string][]byte{"password": []byte("g00d-Pass_word")}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_externaldb")
		Expect(err).NotTo(HaveOccurred())
		sc.Namespace = ns
		Expect(k8sClient.Create(ctx, sc)).To(Succeed())

		By("a Secret that did not opt in is not read")
		eventuallyCondition(ctx, ns, "research", "AccountingAvailable", "DatabaseSecretNotAllowed", "Secret slurm-db")
		Consistently(func() error {
			return k8sClient.Get(ctx, key(ns, "research-slurmdbd-conf"), &corev1.Secret{})
		}).WithTimeout(2 * time.Second).ShouldNot(Succeed())
		Eventually(func() error {
			if err := k8sClient.Get(ctx, key(ns, "slurm-db"), secret); err != nil {
				return err
			}
			secret.Labels = map[string]string{slurmv1alpha1.LabelAllowReference: "true"}
			return k8sClient.Update(ctx, secret)
		}).WithTimeout(timeout).Should(Succeed())
		// The user's Secret is not watched (the operator looks again every 30 s): nudge it.
		updateSpec(ctx, ns, "research", func(sc *slurmv1alpha1.SlurmCluster) { sc.Annotations = map[string]string{"nudge": "1"} })
		conf := get(ctx, &corev1.Secret{}, ns, "research-slurmdbd-conf").Data["slurmdbd.conf"]
		Expect(string(conf)).To(ContainSubstring("StoragePass=g00d-Pass_word"))
		Expect(string(conf)).To(ContainSubstring("StorageHost=mariadb.databases.svc"))
		dbd := get(ctx, &appsv1.StatefulSet{}, ns, "research-accounting")

		By("a password with '#' and a line break: refused with the Secret named, nothing removed")
		secret.Data["password"] = []byte("bad#pass\nStorageUser=root")
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		updateSpec(ctx, ns, "research", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 5 })
		eventuallyCondition(ctx, ns, "research", "AccountingAvailable", "DatabasePasswordUnusable", "Secret slurm-db")
		// The status tells what is wrong, never what the password holds or where.
		Expect(k8sClient.Get(ctx, key(ns, "research"), sc)).To(Succeed())
		msg := meta.FindStatusCondition(sc.Status.Conditions, "AccountingAvailable").Message
		Expect(msg).NotTo(ContainSubstring(`"#"`))
		Expect(msg).NotTo(ContainSubstring("position"))
		Expect(msg).NotTo(ContainSubstring("bad"))
		Expect(get(ctx, &corev1.Secret{}, ns, "research-slurmdbd-conf").Data["slurmdbd.conf"]).To(Equal(conf))
		Expect(get(ctx, &appsv1.StatefulSet{}, ns, "research-accounting").UID).To(Equal(dbd.UID))
		// The Secret's change alone may have set the condition before the
		// spec's new size was read: the rest of the cluster still follows it.
		Eventually(func() string { return slurmConf(ctx, ns, "research") }).WithTimeout(timeout).
			Should(ContainSubstring("worker-[0-4]"))
		Expect(slurmConf(ctx, ns, "research")).To(ContainSubstring("AccountingStorageType=accounting_storage/slurmdbd"))
		Expect(get(ctx, &corev1.Secret{}, ns, "research-slurmdbd-conf").Data["slurmdbd.conf"]).To(Equal(conf))
	})
})
