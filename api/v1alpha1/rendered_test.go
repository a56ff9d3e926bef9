package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

// podFieldEdit changes a field that reaches a rendered pod, Service or claim. The API server must
// either refuse it at admission, naming field, or accept it and then accept everything the
// operator renders from it: a spec must never be admitted that Kubernetes refuses later, when
// the operator writes its StatefulSets.
type podFieldEdit struct {
	name  string
	edit  func(obj map[string]any)
	field string
}

// podFieldEdits go through Kubernetes' own validation of what the spec reaches: resources,
// placement (node selectors, affinity, tolerations), volume sources, claim templates, images,
// names, annotations and Secret references. Valid edge values are here too, so that a rule
// that refuses what Kubernetes takes would show.
func podFieldEdits() []podFieldEdit {
	filter := "spec.k8sNodeFilters[0]"
	externalDB := func(ref map[string]any) func(map[string]any) {
		return setTo("spec.slurmNodes.accounting", map[string]any{"enabled": true, "externalDB": map[string]any{"host": "db", "user": "slurm", "passwordSecretKeyRef": ref}})
	}
	return []podFieldEdit{
		// Resources.
		{"worker requests above their limits", setTo("spec.slurmNodes.worker.resources", map[string]any{"requests": map[string]any{"cpu": "4"}, "limits": map[string]any{"cpu": "2"}}), "spec.slurmNodes.worker.resources"},
		{"login memory requests above their limits", setTo("spec.slurmNodes.login.resources", map[string]any{"requests": map[string]any{"memory": "4Gi"}, "limits": map[string]any{"memory": "1Gi"}}), "spec.slurmNodes.login.resources"},
		{"controller requests above their limits", setTo("spec.slurmNodes.controller.resources", map[string]any{"requests": map[string]any{"cpu": "1"}, "limits": map[string]any{"cpu": "500m"}}), "spec.slurmNodes.controller.resources"},
		{"exporter requests above their limits", setTo("spec.slurmNodes.exporter", map[string]any{"enabled": true, "resources": map[string]any{"requests": map[string]any{"memory": "1Gi"}, "limits": map[string]any{"memory": "100Mi"}}}), "spec.slurmNodes.exporter.resources"},
		{"a worker resource that is not a resource name", setTo("spec.slurmNodes.worker.resources", map[string]any{"limits": map[string]any{"gpus": "1"}}), "spec.slurmNodes.worker.resources"},
		{"a login resource name with a space", setTo("spec.slurmNodes.login.resources", map[string]any{"requests": map[string]any{"my cpu": "1"}}), "spec.slurmNodes.login.resources"},
		{"worker requests equal to their limits, and an extended resource (valid)", setTo("spec.slurmNodes.worker.resources", map[string]any{"requests": map[string]any{"cpu": "2", "memory": "4Gi"}, "limits": map[string]any{"cpu": "2", "memory": "4Gi", "example.com/fpga": "1"}}), ""},
		{"worker requests of an extended resource without its limit", setTo("spec.slurmNodes.worker.resources", map[string]any{"requests": map[string]any{"example.com/fpga": "1"}}), "spec.slurmNodes.worker.resources"},
		{"half a GPU", setTo("spec.slurmNodes.worker.resources", map[string]any{"limits": map[string]any{"nvidia.com/gpu": "500m"}}), "spec.slurmNodes.worker.resources.limits"},
		{"a GPU request below its limit", setTo("spec.slurmNodes.worker.resources", map[string]any{"requests": map[string]any{"nvidia.com/gpu": 1}, "limits": map[string]any{"nvidia.com/gpu": 2}}), "spec.slurmNodes.worker.resources.requests"},
		{"more resource names than a container takes here", setTo("spec.slurmNodes.worker.resources", map[string]any{"limits": map[string]any{"cpu": 1, "memory": "1Gi", "ephemeral-storage": "1Gi", "a.io/1": 1, "a.io/2": 1, "a.io/3": 1, "a.io/4": 1, "a.io/5": 1, "a.io/6": 1, "a.io/7": 1, "a.io/8": 1}}), "spec.slurmNodes.worker.resources.limits"},
		{"a resource claim", setTo("spec.slurmNodes.worker.resources", map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}), "spec.slurmNodes.worker.resources.claims"},

		// Placement.
		{"a node selector value with a space", setTo(filter+".nodeSelector", map[string]any{"pool": "gpu nodes"}), filter + ".nodeSelector"},
		{"a node selector key with two slashes", setTo(filter+".nodeSelector", map[string]any{"a/b/c": "x"}), filter + ".nodeSelector"},
		{"a node selector value of 64 characters", setTo(filter+".nodeSelector", map[string]any{"pool": strings.Repeat("a", 64)}), filter + ".nodeSelector"},
		{"an empty node selector value (valid)", setTo(filter+".nodeSelector", map[string]any{"pool": ""}), ""},
		{"a toleration that matches any value but names one", setTo(filter+".tolerations", []any{map[string]any{"key": "gpu", "operator": "Exists", "value": "x"}}), filter + ".tolerations[0]"},
		{"a toleration of an unknown effect", setTo(filter+".tolerations", []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "Sometimes"}}), filter + ".tolerations[0].effect"},
		{"a toleration of an unknown operator", setTo(filter+".tolerations", []any{map[string]any{"key": "gpu", "operator": "Is", "value": "x"}}), filter + ".tolerations[0].operator"},
		{"a toleration with seconds for NoSchedule", setTo(filter+".tolerations", []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}}), filter + ".tolerations[0]"},
		{"a toleration key with a space", setTo(filter+".tolerations", []any{map[string]any{"key": "my gpu", "operator": "Exists"}}), filter + ".tolerations[0].key"},
		{"a toleration of every taint without a key but with Equal", setTo(filter+".tolerations", []any{map[string]any{"operator": "Equal", "value": "x"}}), filter + ".tolerations[0]"},
		{"tolerations of every taint and of NoExecute for 30 s (valid)", setTo(filter+".tolerations", []any{map[string]any{"operator": "Exists"}, map[string]any{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}}), ""},
		{"required node affinity without terms", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{}}}}), filter + ".affinity"},
		{"a node affinity In without values", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In"}}}}}}}), filter + ".affinity"},
		{"a node affinity Exists with values", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Exists", "values": []any{"a"}}}}}}}}), filter + ".affinity"},
		{"a node affinity of an unknown operator", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Near", "values": []any{"a"}}}}}}}}), filter + ".affinity"},
		{"a preferred node affinity of weight 0", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"weight": 0, "preference": map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "Exists"}}}}}}}), filter + ".affinity"},
		{"a node affinity key with a space", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "my pool", "operator": "Exists"}}}}}}}), filter + ".affinity"},
		{"a node affinity Gt of a word", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "gpus", "operator": "Gt", "values": []any{"many"}}}}}}}}), filter + ".affinity"},
		{"required and preferred node affinity (valid)", setTo(filter+".affinity", map[string]any{"nodeAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution":  map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"a", "b"}}, map[string]any{"key": "gpus", "operator": "Gt", "values": []any{"3"}}}}}},
			"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"weight": 100, "preference": map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "NotIn", "values": []any{"c"}}}}}}}}), ""},
		{"a pod affinity in a node filter", setTo(filter+".affinity", map[string]any{"podAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"topologyKey": ""}}}}), filter + ".affinity"},

		// Volume sources.
		{"a claim without a name", setTo("spec.volumeSources[1].persistentVolumeClaim", map[string]any{"claimName": ""}), "spec.volumeSources[1].persistentVolumeClaim.claimName"},
		{"an NFS export with a relative path", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "nfs": map[string]any{"server": "nfs.example.com", "path": "export/data"}}), "spec.volumeSources[1].nfs.path"},
		{"an NFS export without a server", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "nfs": map[string]any{"server": "", "path": "/export"}}), "spec.volumeSources[1].nfs.server"},
		{"an NFS export (valid)", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "nfs": map[string]any{"server": "10.0.0.5", "path": "/export/data"}}), ""},
		{"a hostPath without a path", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "hostPath": map[string]any{"path": ""}}), "spec.volumeSources[1].hostPath.path"},
		{"a hostPath with '..'", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "hostPath": map[string]any{"path": "/srv/../etc"}}), "spec.volumeSources[1].hostPath.path"},
		{"a hostPath of an unknown type", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "hostPath": map[string]any{"path": "/srv/data", "type": "Folder"}}), "spec.volumeSources[1].hostPath.type"},
		{"a negative emptyDir size", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "emptyDir": map[string]any{"sizeLimit": "-1Gi"}}), "spec.volumeSources[1].emptyDir.sizeLimit"},
		{"an emptyDir of an unknown medium", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "emptyDir": map[string]any{"medium": "Disk"}}), "spec.volumeSources[1].emptyDir.medium"},
		{"a CSI volume without a driver", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "csi": map[string]any{"driver": ""}}), "spec.volumeSources[1].csi.driver"},
		{"a CSI driver name with a space", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "csi": map[string]any{"driver": "my driver"}}), "spec.volumeSources[1].csi.driver"},
		{"a CSI volume (valid)", setTo("spec.volumeSources[1]", map[string]any{"name": "data", "csi": map[string]any{"driver": "csi.example.com", "volumeAttributes": map[string]any{"share": "data"}}}), ""},
		{"a volume source name with capitals", func(m map[string]any) {
			setTo("spec.volumeSources[1].name", "Data")(m)
			setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].volumeSourceName", "Data")(m)
			setTo("spec.slurmNodes.login.volumes.jailSubMounts[0].volumeSourceName", "Data")(m)
		}, "spec.volumeSources[1].name"},
		{"a jail sub-mount name with capitals", func(m map[string]any) {
			setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].name", "Data")(m)
			setTo("spec.slurmNodes.login.volumes.jailSubMounts[0].name", "Data")(m)
		}, "spec.slurmNodes.worker.volumes.jailSubMounts[0].name"},
		{"two jail sub-mounts with one name", setTo("spec.slurmNodes.worker.volumes.jailSubMounts", []any{
			map[string]any{"name": "data", "mountPath": "/mnt/data", "volumeSourceName": "data"},
			map[string]any{"name": "data", "mountPath": "/mnt/other", "volumeSourceName": "data"}}), "spec.slurmNodes.worker.volumes.jailSubMounts[1]"},
		{"a spool claim template without access modes", setTo("spec.slurmNodes.worker.volumes.spool", map[string]any{"volumeClaimTemplateSpec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}), "spec.slurmNodes.worker.volumes.spool.volumeClaimTemplateSpec"},
		{"a spool claim template without a size", setTo("spec.slurmNodes.worker.volumes.spool", map[string]any{"volumeClaimTemplateSpec": map[string]any{"accessModes": []any{"ReadWriteOnce"}}}), "spec.slurmNodes.worker.volumes.spool.volumeClaimTemplateSpec"},
		{"a controller spool claim template of an unknown access mode", setTo("spec.slurmNodes.controller.volumes", map[string]any{"spool": map[string]any{"volumeClaimTemplateSpec": map[string]any{"accessModes": []any{"ReadWriteSome"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}), "spec.slurmNodes.controller.volumes.spool.volumeClaimTemplateSpec.accessModes"},

		// Images, Secrets, names, annotations.
		{"a pull Secret name with capitals", setTo("spec.images.pullSecrets", []any{map[string]any{"name": "RegCred"}}), "spec.images.pullSecrets[0].name"},
		{"two pull Secrets of one name", setTo("spec.images.pullSecrets", []any{map[string]any{"name": "regcred"}, map[string]any{"name": "regcred"}}), "spec.images.pullSecrets[1]"},
		{"pull Secrets (valid)", setTo("spec.images.pullSecrets", []any{map[string]any{"name": "regcred"}, map[string]any{"name": "mirror.example"}}), ""},
		{"an image with a space", setTo("spec.images.worker", "slurm-k8s/worker :24.11"), "spec.images.worker"},
		{"an empty image", setTo("spec.images.login", ""), "spec.images.login"},
		{"an image with a trailing newline", setTo("spec.images.controller", "slurm-k8s/controller:24.11\n"), "spec.images.controller"},
		{"a database password Secret name with capitals", externalDB(map[string]any{"name": "DB", "key": "password"}), "spec.slurmNodes.accounting.externalDB.passwordSecretKeyRef.name"},
		{"a database password key with a slash", externalDB(map[string]any{"name": "db", "key": "a/b"}), "spec.slurmNodes.accounting.externalDB.passwordSecretKeyRef.key"},
		{"a login Service annotation key with a space", setTo("spec.slurmNodes.login.service.annotations", map[string]any{"my key": "x"}), "spec.slurmNodes.login.service.annotations"},
		{"a login Service annotation of a cloud (valid)", setTo("spec.slurmNodes.login.service.annotations", map[string]any{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}), ""},
		{"blocked egress addresses with host bits, and IPv6 alone (valid)", setTo("spec.networkPolicies.blockedEgressCIDRs", []any{"10.1.2.3/8", "fd00:ec2::254/64"}), ""},
		{"no blocked egress address (valid)", setTo("spec.networkPolicies.blockedEgressCIDRs", []any{}), ""},
		{"a worker pod annotation value of 300 KiB", setTo("spec.slurmNodes.worker.podAnnotations", map[string]any{"example.com/big": strings.Repeat("a", 300*1024)}), "spec.slurmNodes.worker.podAnnotations"},
		{"32 worker pod annotations of 8 KiB each", setTo("spec.slurmNodes.worker.podAnnotations", manyAnnotations(32, 8192)), "spec.slurmNodes.worker.podAnnotations"},
		{"32 login pod annotations of 8 KiB each", setTo("spec.slurmNodes.login.podAnnotations", manyAnnotations(32, 8192)), "spec.slurmNodes.login.podAnnotations"},
		{"worker pod annotations of 120 KiB in all (valid)", setTo("spec.slurmNodes.worker.podAnnotations", manyAnnotations(15, 8192)), ""},

		// Node sets: what a set sets instead of spec.slurmNodes.worker.
		{"a node set of every field (valid)", nodeSet(map[string]any{
			"name": "a100", "size": 2, "k8sNodeFilterName": "gpu", "gpu": 4, "features": []any{"ampere", "nvlink"},
			"resources":      map[string]any{"requests": map[string]any{"cpu": "4", "memory": "8Gi"}, "limits": map[string]any{"cpu": "4", "memory": "8Gi", "rdma/ib": "1"}},
			"podAnnotations": map[string]any{"k8s.v1.cni.cncf.io/networks": "ib-sriov"}, "image": "slurm-k8s/worker:24.11-a100",
			"cpuTopology": map[string]any{"sockets": 2, "coresPerSocket": 2, "threadsPerCore": 1},
		}), ""},
		{"a node set image with a trailing newline", nodeSet(map[string]any{"name": "a100", "size": 1, "image": "slurm-k8s/worker:24.11\n"}), "spec.slurmNodes.nodeSets[0].image"},
		{"a node set image with a space", nodeSet(map[string]any{"name": "a100", "size": 1, "image": "slurm-k8s/worker :24.11"}), "spec.slurmNodes.nodeSets[0].image"},
		{"a node set pod annotation key with a space", nodeSet(map[string]any{"name": "a100", "size": 1, "podAnnotations": map[string]any{"my key": "x"}}), "spec.slurmNodes.nodeSets[0].podAnnotations"},
		{"32 node set pod annotations of 8 KiB each", nodeSet(map[string]any{"name": "a100", "size": 1, "podAnnotations": manyAnnotations(32, 8192)}), "spec.slurmNodes.nodeSets[0].podAnnotations"},
		{"a node set resource that is not a resource name", nodeSet(map[string]any{"name": "a100", "size": 1, "resources": map[string]any{"limits": map[string]any{"gpus": "1"}}}), "spec.slurmNodes.nodeSets[0].resources.limits"},
		{"a node set resource name with a space", nodeSet(map[string]any{"name": "a100", "size": 1, "resources": map[string]any{"requests": map[string]any{"my/fpga card": "1"}}}), "spec.slurmNodes.nodeSets[0].resources.requests"},
		{"a node set feature with a comma", nodeSet(map[string]any{"name": "a100", "size": 1, "features": []any{"a,b"}}), "spec.slurmNodes.nodeSets[0].features[0]"},
	}
}

// renderRefusedEdits are admitted, because the CRD's CEL cost budget cannot hold their rule,
// and refused when the cluster is rendered, naming the field: the status says so and nothing
// is applied.
func renderRefusedEdits() []podFieldEdit {
	return []podFieldEdit{
		{"node set requests above their limits", nodeSet(map[string]any{"name": "a100", "size": 1, "resources": map[string]any{"requests": map[string]any{"memory": "8Gi"}, "limits": map[string]any{"memory": "4Gi"}}}), "spec.slurmNodes.nodeSets[0].resources"},
		{"node set CPU requests above their limits", nodeSet(map[string]any{"name": "a100", "size": 1, "resources": map[string]any{"requests": map[string]any{"cpu": "3"}, "limits": map[string]any{"cpu": "2"}}}), "spec.slurmNodes.nodeSets[0].resources"},
	}
}

// manyAnnotations are n annotations of size bytes each.
func manyAnnotations(n, size int) map[string]any {
	out := map[string]any{}
	for i := 0; i < n; i++ {
		out[fmt.Sprintf("example.com/a%d", i)] = strings.Repeat("a", size)
	}
	return out
}

// nodeSet adds one node set to the spec.
func nodeSet(set map[string]any) func(map[string]any) {
	return setTo("spec.slurmNodes.nodeSets", []any{set})
}

var _ = Describe("what the API server admits, Kubernetes accepts from the operator", func() {
	for _, tc := range podFieldEdits() {
		It("for "+tc.name+": refused naming the field, or every rendered object accepted", func(ctx SpecContext) {
			name, err := createEdited(ctx, tc)
			if err != nil {
				Expect(tc.field).NotTo(BeEmpty(), "a valid spec was refused: %v", err)
				Expect(err.Error()).To(ContainSubstring(tc.field), "refused without naming the field")
				return
			}
			sc := &slurmv1alpha1.SlurmCluster{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, sc)).To(Succeed())
			refused := dryRunRendered(ctx, sc)
			Expect(refused).To(BeEmpty(), "admitted, but Kubernetes refuses what the operator renders from it")
			Expect(tc.field).To(BeEmpty(), "admitted and rendered without error: if this edit is valid, say so (field \"\")")
		})
	}
})

var _ = Describe("what the API server admits but cannot check, the render refuses", func() {
	for _, tc := range renderRefusedEdits() {
		It("for "+tc.name+": refused when rendered, naming the field", func(ctx SpecContext) {
			name, err := createEdited(ctx, tc)
			Expect(err).NotTo(HaveOccurred())
			sc := &slurmv1alpha1.SlurmCluster{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, sc)).To(Succeed())
			_, err = render.All(fixtures.Input(sc))
			Expect(err).To(MatchError(ContainSubstring(tc.field)))
		})
	}
})

// createEdited creates the base manifest with the edit applied, named after the case.
func createEdited(ctx context.Context, tc podFieldEdit) (string, error) {
	obj := baseManifest()
	name := fmt.Sprintf("edit-%x", fnv(tc.name))
	setTo("metadata.name", name)(obj)
	setTo("spec.clusterName", name)(obj)
	tc.edit(obj)
	return name, create(ctx, obj, "default")
}

// dryRunRendered creates every object the operator renders for sc with a server-side dry run and
// returns the refusals. Kinds the API server does not serve here (mariadb-operator's, the
// ServiceMonitor) are left out.
func dryRunRendered(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) []string {
	parts, err := render.All(fixtures.Input(sc))
	if err != nil {
		return []string{"the operator cannot render it: " + err.Error()}
	}
	var refused []string
	for _, p := range parts {
		for _, o := range p.Objects {
			err := k8sClient.Create(ctx, o, client.DryRunAll)
			if err == nil || meta.IsNoMatchError(err) {
				continue
			}
			refused = append(refused, fmt.Sprintf("%T %s: %v", o, o.GetName(), err))
		}
	}
	return refused
}

// fnv names a case's object after its title.
func fnv(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
