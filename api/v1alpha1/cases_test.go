package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// The manifests and cases in this file are shared by the in-process schema tests
// (validation_test.go) and the API server tests (envtest_test.go), so both check the same rules.

const crdPath = "../../config/crd/bases/slurm.hpc.dev_slurmclusters.yaml"

// baseManifest is a small valid SlurmCluster that every invalid case starts from.
func baseManifest() map[string]any {
	return mustYAML(`
apiVersion: slurm.hpc.dev/v1alpha1
kind: SlurmCluster
metadata:
  name: base
spec:
  clusterName: base
  k8sNodeFilters:
    - name: gpu
      nodeSelector: {nvidia.com/gpu.present: "true"}
    - name: no-gpu
  volumeSources:
    - name: jail
      persistentVolumeClaim: {claimName: jail-pvc}
    - name: data
      persistentVolumeClaim: {claimName: data-pvc}
  slurmConfig:
    partitions:
      - name: main
        default: true
  slurmNodes:
    controller:
      k8sNodeFilterName: no-gpu
    worker:
      size: 2
      k8sNodeFilterName: gpu
      volumes:
        jail: {volumeSourceName: jail}
        jailSubMounts:
          - {name: data, mountPath: /mnt/data, volumeSourceName: data}
    login:
      size: 1
      k8sNodeFilterName: no-gpu
      volumes:
        jail: {volumeSourceName: jail}
        jailSubMounts:
          - {name: data, mountPath: /mnt/data, volumeSourceName: data}
`)
}

// invalidCase is one manifest the API server must reject, and the field its message must name.
type invalidCase struct {
	name   string
	edit   func(obj map[string]any)
	field  string // the field path the error must name
	reason string // a fragment of the message
}

func invalidCases() []invalidCase {
	return []invalidCase{
		{"an empty clusterName", setTo("spec.clusterName", ""), "spec.clusterName", "at least 1"},
		{"a clusterName with capitals", setTo("spec.clusterName", "FPT"), "spec.clusterName", "should match"},
		{"a clusterName with a newline", setTo("spec.clusterName", "a\nControlMachine=x"), "spec.clusterName", "should match"},
		{"a controller size of 3", setTo("spec.slurmNodes.controller.size", 3), "spec.slurmNodes.controller.size", "less than or equal to 2"},
		{"a backup controller without a ReadWriteMany spool", setTo("spec.slurmNodes.controller.size", 2), "spec.slurmNodes.controller.size", "ReadWriteMany"},
		{"a backup controller whose spool is a claim per pod, even ReadWriteMany", func(m map[string]any) {
			setTo("spec.slurmNodes.controller.size", 2)(m)
			setTo("spec.slurmNodes.controller.volumes.spool", map[string]any{"volumeClaimTemplateSpec": map[string]any{
				"accessModes": []any{"ReadWriteMany"}, "resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}}})(m)
		}, "spec.slurmNodes.controller.size", "volumeSourceName"},
		{"a negative worker size", setTo("spec.slurmNodes.worker.size", -1), "spec.slurmNodes.worker.size", "greater than or equal to 0"},
		{"an upgrade backup to a volume that is not a volume source", setTo("spec.upgrades.backup", map[string]any{"volumeSourceName": "nope"}),
			"spec.upgrades.backup.volumeSourceName", "must name an entry of spec.volumeSources"},
		{"an upgrade backup to an emptyDir", func(m map[string]any) {
			setTo("spec.volumeSources", []any{
				map[string]any{"name": "jail", "persistentVolumeClaim": map[string]any{"claimName": "jail-pvc"}},
				map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "data-pvc"}},
				map[string]any{"name": "scratch", "emptyDir": map[string]any{}}})(m)
			setTo("spec.upgrades.backup", map[string]any{"volumeSourceName": "scratch"})(m)
		}, "spec.upgrades.backup.volumeSourceName", "names an emptyDir volume source"},
		{"an upgrade backup that names a volume and skips", setTo("spec.upgrades.backup", map[string]any{"volumeSourceName": "data", "skip": true}),
			"spec.upgrades.backup", "set either volumeSourceName"},
		{"an upgrade backup that says nothing", setTo("spec.upgrades.backup", map[string]any{"skip": false}),
			"spec.upgrades.backup", "set either volumeSourceName"},
		{"scheduled backups to a volume that is not a volume source", setTo("spec.backups", map[string]any{"schedule": "@daily", "volumeSourceName": "nope"}),
			"spec.backups.volumeSourceName", "must name an entry of spec.volumeSources"},
		{"scheduled backups to an emptyDir", func(m map[string]any) {
			setTo("spec.volumeSources", []any{
				map[string]any{"name": "jail", "persistentVolumeClaim": map[string]any{"claimName": "jail-pvc"}},
				map[string]any{"name": "scratch", "emptyDir": map[string]any{}}})(m)
			setTo("spec.backups", map[string]any{"schedule": "@daily", "volumeSourceName": "scratch"})(m)
		}, "spec.backups.volumeSourceName", "names an emptyDir volume source"},
		{"scheduled backups without a schedule", setTo("spec.backups", map[string]any{"volumeSourceName": "data"}),
			"spec.backups.schedule", "Required value"},
		{"a backup schedule of three fields", setTo("spec.backups", map[string]any{"schedule": "0 3 *", "volumeSourceName": "data"}),
			"spec.backups.schedule", "should match"},
		{"a backup schedule at minute 61", setTo("spec.backups", map[string]any{"schedule": "61 3 * * *", "volumeSourceName": "data"}),
			"spec.backups.schedule", "out of cron's range"},
		{"a backup schedule on day of week 7", setTo("spec.backups", map[string]any{"schedule": "0 3 * * 7", "volumeSourceName": "data"}),
			"spec.backups.schedule", "out of cron's range"},
		{"a backup schedule with its time zone", setTo("spec.backups", map[string]any{"schedule": "TZ=UTC 0 3 * * *", "volumeSourceName": "data"}),
			"spec.backups.schedule", "set the time zone in backups.timeZone"},
		{"keeping no backup", setTo("spec.backups", map[string]any{"schedule": "@daily", "volumeSourceName": "data", "keep": 0}),
			"spec.backups.keep", "greater than or equal to 1"},
		{"a worker size above 4096", setTo("spec.slurmNodes.worker.size", 5000), "spec.slurmNodes.worker.size", "less than or equal to 4096"},
		{"both a default memory per node and per CPU", func(m map[string]any) {
			setTo("spec.slurmConfig.defMemPerNode", 4096)(m)
			setTo("spec.slurmConfig.defMemPerCPU", 1024)(m)
		}, "spec.slurmConfig", "at most one of defMemPerNode and defMemPerCPU"},
		{"a default memory per CPU of 0", setTo("spec.slurmConfig.defMemPerCPU", 0), "spec.slurmConfig.defMemPerCPU", "greater than or equal to 1"},
		{"a worker update of 0 at a time", setTo("spec.slurmNodes.worker.updateStrategy.maxUnavailable", 0), "spec.slurmNodes.worker.updateStrategy.maxUnavailable", "at least 1"},
		{"a worker update of 0% at a time", setTo("spec.slurmNodes.worker.updateStrategy.maxUnavailable", "0%"), "spec.slurmNodes.worker.updateStrategy.maxUnavailable", "from 1% to 100%"},
		{"a worker update of 150% at a time", setTo("spec.slurmNodes.worker.updateStrategy.maxUnavailable", "150%"), "spec.slurmNodes.worker.updateStrategy.maxUnavailable", "from 1% to 100%"},
		{"a worker update pace that is neither", setTo("spec.slurmNodes.worker.updateStrategy.maxUnavailable", "two"), "spec.slurmNodes.worker.updateStrategy.maxUnavailable", "a number of workers"},
		{"enforcement without accounting", setTo("spec.slurmNodes.accounting.enforce", []any{"associations"}), "spec.slurmNodes.accounting.enforce", "enforce needs accounting"},
		{"an enforcement Slurm does not know", func(m map[string]any) {
			setTo("spec.slurmNodes.accounting", map[string]any{"enabled": true, "externalDB": map[string]any{"host": "db", "user": "slurm", "passwordSecretKeyRef": map[string]any{"name": "db", "key": "password"}}, "enforce": []any{"everything"}})(m)
		}, "spec.slurmNodes.accounting.enforce[0]", "Unsupported value"},
		{"more than 64 GPUs per worker", setTo("spec.slurmNodes.worker.gpu", 100), "spec.slurmNodes.worker.gpu", "less than or equal to 64"},
		{"a worker node filter that does not exist", setTo("spec.slurmNodes.worker.k8sNodeFilterName", "tpu"), "spec.slurmNodes.worker.k8sNodeFilterName", "spec.k8sNodeFilters"},
		{"a controller node filter that does not exist", setTo("spec.slurmNodes.controller.k8sNodeFilterName", "cpu"), "spec.slurmNodes.controller.k8sNodeFilterName", "spec.k8sNodeFilters"},
		{"a login node filter that does not exist", setTo("spec.slurmNodes.login.k8sNodeFilterName", "edge"), "spec.slurmNodes.login.k8sNodeFilterName", "spec.k8sNodeFilters"},
		{"an accounting node filter that does not exist", setTo("spec.slurmNodes.accounting.k8sNodeFilterName", "db"), "spec.slurmNodes.accounting.k8sNodeFilterName", "spec.k8sNodeFilters"},
		{"a worker pod annotation under the operator's prefix", setTo("spec.slurmNodes.worker.podAnnotations", map[string]any{"k8s.v1.cni.cncf.io/networks": "rdma-net", "slurm.hpc.dev/config-seen": "x"}), "spec.slurmNodes.worker.podAnnotations", "the operator's own"},
		{"a worker pod annotation key with a space", setTo("spec.slurmNodes.worker.podAnnotations", map[string]any{"bad key": "x"}), "spec.slurmNodes.worker.podAnnotations", "must be an annotation key"},
		{"a login pod annotation key with two slashes", setTo("spec.slurmNodes.login.podAnnotations", map[string]any{"a/b/c": "x"}), "spec.slurmNodes.login.podAnnotations", "must be an annotation key"},
		{"a login pod annotation under the operator's prefix", setTo("spec.slurmNodes.login.podAnnotations", map[string]any{"slurm.hpc.dev/restart-hash": "x"}), "spec.slurmNodes.login.podAnnotations", "the operator's own"},
		{"a Docker data size of zero", setTo("spec.docker.dataSizeLimit", "0"), "spec.docker.dataSizeLimit", "must be a positive size"},
		{"a registry mirror that is not a URL", setTo("spec.docker.registryMirrors", []any{"mirror.example.com"}), "spec.docker.registryMirrors[0]", "should match"},
		{"an exporter node filter that does not exist", setTo("spec.slurmNodes.exporter.k8sNodeFilterName", "mon"), "spec.slurmNodes.exporter.k8sNodeFilterName", "spec.k8sNodeFilters"},
		{"a populate Job node filter that does not exist", setTo("spec.populateJail", map[string]any{"image": "j:1", "k8sNodeFilterName": "x"}), "spec.populateJail.k8sNodeFilterName", "spec.k8sNodeFilters"},
		{"a worker jail that names no volume source", setTo("spec.slurmNodes.worker.volumes.jail.volumeSourceName", "jail2"), "spec.slurmNodes.worker.volumes.jail.volumeSourceName", "spec.volumeSources"},
		{"a login jail that names no volume source", setTo("spec.slurmNodes.login.volumes.jail.volumeSourceName", "root"), "spec.slurmNodes.login.volumes.jail.volumeSourceName", "spec.volumeSources"},
		{"a controller spool that names no volume source", setTo("spec.slurmNodes.controller.volumes", map[string]any{"spool": map[string]any{"volumeSourceName": "spool"}}), "spec.slurmNodes.controller.volumes.spool.volumeSourceName", "spec.volumeSources"},
		{"a worker jail sub-mount that names no volume source", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].volumeSourceName", "nope"), "spec.slurmNodes.worker.volumes.jailSubMounts", "spec.volumeSources"},
		{"a jail sub-mount with another mountPath on login", setTo("spec.slurmNodes.login.volumes.jailSubMounts[0].mountPath", "/data"), "spec.slurmNodes.login.volumes.jailSubMounts", "same mountPath"},
		{"a worker without a jail", deleteAt("spec.slurmNodes.worker.volumes.jail"), "spec.slurmNodes.worker.volumes.jail", "Required"},
		{"two volume sources with one name", setTo("spec.volumeSources[1].name", "jail"), "spec.volumeSources[1]", "Duplicate"},
		{"two node filters with one name", setTo("spec.k8sNodeFilters[1].name", "gpu"), "spec.k8sNodeFilters[1]", "Duplicate"},
		{"a volume source with two sources", setTo("spec.volumeSources[0].emptyDir", map[string]any{}), "spec.volumeSources[0]", "exactly one"},
		{"a volume source with no source", deleteAt("spec.volumeSources[1].persistentVolumeClaim"), "spec.volumeSources[1]", "exactly one"},
		{"a spool with both a template and a volume source", setTo("spec.slurmNodes.worker.volumes.spool", map[string]any{"volumeSourceName": "data", "volumeClaimTemplateSpec": map[string]any{}}), "spec.slurmNodes.worker.volumes.spool", "exactly one"},
		{"a relative jail sub-mount path", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "mnt/data"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "should match"},
		{"a jail sub-mount over /proc", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "/proc"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "system directory"},
		{"a jail sub-mount path with '..'", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "/mnt/../etc"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "'..'"},
		{"a prolog followed by a second Slurm key", setTo("spec.slurmConfig.prolog", "/etc/slurm/prolog.sh SlurmUser=root"), "spec.slurmConfig.prolog", "should match"},
		{"an epilog that is not an absolute path", setTo("spec.slurmConfig.epilog", "epilog.sh"), "spec.slurmConfig.epilog", "should match"},
		{"a /dev/shm of size zero", setTo("spec.slurmNodes.worker.sharedMemorySize", "0"), "spec.slurmNodes.worker.sharedMemorySize", "positive size"},
		{"a negative /dev/shm", setTo("spec.slurmNodes.worker.sharedMemorySize", "-1Gi"), "spec.slurmNodes.worker.sharedMemorySize", "positive size"},
		{"sshd on port 0", setTo("spec.slurmNodes.login.sshd.port", 0), "spec.slurmNodes.login.sshd.port", "greater than or equal to 1"},
		{"sshd on port 70000", setTo("spec.slurmNodes.login.sshd.port", 70000), "spec.slurmNodes.login.sshd.port", "less than or equal to 65535"},
		{"a login Service of an unknown type", setTo("spec.slurmNodes.login.service.type", "Public"), "spec.slurmNodes.login.service.type", "Unsupported value"},
		{"a source range that is not a CIDR", setTo("spec.slurmNodes.login.service.loadBalancerSourceRanges", []any{"10.0.0.1"}), "spec.slurmNodes.login.service.loadBalancerSourceRanges[0]", "CIDR"},
		{"an SSH key that is not a public key", setTo("spec.slurmNodes.login.sshRootPublicKeys", []any{"-----BEGIN OPENSSH PRIVATE KEY-----"}), "spec.slurmNodes.login.sshRootPublicKeys[0]", "should match"},
		{"an SSH key with a second line", setTo("spec.slurmNodes.login.sshRootPublicKeys", []any{"ssh-ed25519 AAAA x\nssh-rsa AAAA evil"}), "spec.slurmNodes.login.sshRootPublicKeys[0]", "should match"},
		{"accounting enabled without a database", setTo("spec.slurmNodes.accounting", map[string]any{"enabled": true}), "spec.slurmNodes.accounting", "exactly one database"},
		{"accounting with two databases", setTo("spec.slurmNodes.accounting", map[string]any{"enabled": true, "mariadbOperator": map[string]any{"enabled": true}, "externalDB": map[string]any{"host": "db", "user": "slurm", "passwordSecretKeyRef": map[string]any{"name": "s", "key": "p"}}}), "spec.slurmNodes.accounting", "exactly one database"},
		{"an external database on port 0", setTo("spec.slurmNodes.accounting", map[string]any{"enabled": true, "externalDB": map[string]any{"host": "db", "port": 0, "user": "slurm", "passwordSecretKeyRef": map[string]any{"name": "s", "key": "p"}}}), "spec.slurmNodes.accounting.externalDB.port", "greater than or equal to 1"},
		{"an extra slurm.conf line with a newline", setTo("spec.slurmConfig.extraSlurmConf", []any{"MaxJobCount=10\nSlurmUser=root"}), "spec.slurmConfig.extraSlurmConf[0]", "single line"},
		{"an extra SrunPortRange line", setTo("spec.slurmConfig.extraSlurmConf", []any{"srunportrange = 50000-51000"}), "spec.slurmConfig.extraSlurmConf", "SrunPortRange is set by the operator"},
		{"a blocked egress address that is no CIDR", setTo("spec.networkPolicies.blockedEgressCIDRs", []any{"169.254.169.254"}), "spec.networkPolicies.blockedEgressCIDRs", "IPv4 or IPv6 CIDR"},
		{"a blocked egress block of every address", setTo("spec.networkPolicies.blockedEgressCIDRs", []any{"0.0.0.0/0"}), "spec.networkPolicies.blockedEgressCIDRs", "prefix length above 0"},
		{"an extra TopologyPlugin line", setTo("spec.slurmConfig.extraSlurmConf", []any{"TopologyPlugin=topology/tree"}), "spec.slurmConfig.extraSlurmConf", "spec.slurmConfig.topology"},
		{"a topology plugin Slurm has not here", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "3d_torus", "blockLabel": "rack"}), "spec.slurmConfig.topology.plugin", "Unsupported value"},
		{"a block topology without its label", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "block"}), "spec.slurmConfig.topology.blockLabel", "needs blockLabel"},
		{"a block topology with switch labels", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "block", "blockLabel": "rack", "switchLabels": []any{"leaf"}}), "spec.slurmConfig.topology.blockLabel", "takes no switchLabels"},
		{"a tree topology with block sizes", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "tree", "switchLabels": []any{"leaf"}, "blockSizes": []any{4}}), "spec.slurmConfig.topology.switchLabels", "neither blockLabel nor blockSizes"},
		{"a tree topology without switch labels", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "tree"}), "spec.slurmConfig.topology.switchLabels", "needs switchLabels"},
		{"block sizes that are not the base times a power of two", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "block", "blockLabel": "rack", "blockSizes": []any{4, 12}}), "spec.slurmConfig.topology.blockSizes", "power of two"},
		{"block sizes whose first is not the smallest", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "block", "blockLabel": "rack", "blockSizes": []any{8, 4}}), "spec.slurmConfig.topology.blockSizes", "the base and the smallest"},
		{"a block label that is no label key", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "block", "blockLabel": "rack name"}), "spec.slurmConfig.topology.blockLabel", "should match"},
		{"a switch label named twice", setTo("spec.slurmConfig.topology", map[string]any{"plugin": "tree", "switchLabels": []any{"leaf", "leaf"}}), "spec.slurmConfig.topology.switchLabels[1]", "Duplicate value"},
		{"an extra PrologFlags line without Contain", setTo("spec.slurmConfig.extraSlurmConf", []any{"PrologFlags=X11"}), "spec.slurmConfig.extraSlurmConf", "must keep Contain"},
		{"an extra SlurmctldParameters line without configless", setTo("spec.slurmConfig.extraSlurmConf", []any{"MaxJobCount=10", " slurmctldparameters=idle_on_node_suspend"}), "spec.slurmConfig.extraSlurmConf", "enable_configless"},
		{"a prolog with a newline", setTo("spec.slurmConfig.prolog", "/bin/true\nEpilog=/x"), "spec.slurmConfig.prolog", "should match"},
		{"partition options with a newline", setTo("spec.slurmConfig.partitions[0].options", "MaxNodes=2\nNodeName=x"), "spec.slurmConfig.partitions[0].options", "should match"},
		{"partition options that set Nodes", setTo("spec.slurmConfig.partitions[0].options", "Nodes=worker-0"), "spec.slurmConfig.partitions[0].options", "Nodes"},
		{"a partition MaxTime that Slurm cannot read", setTo("spec.slurmConfig.partitions[0].maxTime", "forever"), "spec.slurmConfig.partitions[0].maxTime", "should match"},
		{"autoscaling with minSize above maxSize", setTo("spec.slurmNodes.worker.autoscaling", map[string]any{"enabled": true, "minSize": 3, "maxSize": 2}),
			"spec.slurmNodes.worker.autoscaling.minSize", "must not be above maxSize"},
		{"autoscaling without maxSize", setTo("spec.slurmNodes.worker.autoscaling", map[string]any{"enabled": true}),
			"spec.slurmNodes.worker.autoscaling.maxSize", "Required"},
		{"a size outside autoscaling's range", setTo("spec.slurmNodes.worker.autoscaling", map[string]any{"enabled": true, "maxSize": 1}),
			"spec.slurmNodes.worker.size", "within autoscaling's minSize and maxSize"},
		{"an idle timeout of a second", setTo("spec.slurmNodes.worker.autoscaling", map[string]any{"enabled": true, "maxSize": 4, "idleTimeoutSeconds": 1}),
			"spec.slurmNodes.worker.autoscaling.idleTimeoutSeconds", "greater than or equal to 10"},
		{"a node set's size outside its autoscaling's range", setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "a100", "size": 5,
			"autoscaling": map[string]any{"enabled": true, "maxSize": 4}}}),
			"spec.slurmNodes.nodeSets[0].size", "within autoscaling's minSize and maxSize"},
		{"a node set named like the default set", setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "worker", "size": 1}}),
			"spec.slurmNodes.nodeSets[0].name", "the cluster's own objects use"},
		{"a node set name with a dash", setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "a-100", "size": 1}}),
			"spec.slurmNodes.nodeSets[0].name", "should match"},
		{"a node set name too long for its pods' names", setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "averylongname", "size": 1}}),
			"spec.slurmNodes.nodeSets[0].name", "11"},
		{"two node sets of one name", setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "a100", "size": 1}, map[string]any{"name": "a100", "size": 2}}),
			"spec.slurmNodes.nodeSets[1]", "Duplicate value"},
		{"a node set on a node filter that does not exist", setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "a100", "size": 1, "k8sNodeFilterName": "tpu"}}),
			"spec.slurmNodes.nodeSets", "spec.k8sNodeFilters"},
		{"a node set feature Slurm cannot parse", setTo("spec.slurmNodes.nodeSets", []any{map[string]any{"name": "a100", "size": 1, "features": []any{"ib,nvlink"}}}),
			"spec.slurmNodes.nodeSets[0].features[0]", "should match"},
		{"a partition over a node set that does not exist", setTo("spec.slurmConfig.partitions[0].nodeSets", []any{"worker", "h100"}),
			"spec.slurmConfig.partitions", "must name worker or an entry of spec.slurmNodes.nodeSets"},
		{"two default partitions", setTo("spec.slurmConfig.partitions", []any{map[string]any{"name": "a", "default": true}, map[string]any{"name": "b", "default": true}}), "spec.slurmConfig.partitions", "at most one partition"},
		{"a cgroup.conf key that is not a setting name", setTo("spec.slurmConfig.cgroupConfig", map[string]any{"Constrain Cores": "yes"}), "spec.slurmConfig.cgroupConfig", "setting names"},
		{"a cgroup.conf value followed by a second key", setTo("spec.slurmConfig.cgroupConfig", map[string]any{"ConstrainCores": "yes CgroupPlugin=cgroup/v1"}), "spec.slurmConfig.cgroupConfig.ConstrainCores", "should match"},
		{"a cgroup.conf value with a newline", setTo("spec.slurmConfig.cgroupConfig", map[string]any{"ConstrainCores": "yes\nCgroupPlugin=x"}), "spec.slurmConfig.cgroupConfig.ConstrainCores", "should match"},
		{"an active check with a program and a script", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "JailWritable", "script": "true"}}), "spec.activeChecks[0]", "exactly one of program"},
		{"an active check with neither program nor script", setTo("spec.activeChecks", []any{map[string]any{"name": "a"}}), "spec.activeChecks[0]", "exactly one of program"},
		{"an active check program the operator has not", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "Memtest"}}), "spec.activeChecks[0].program", "Unsupported value"},
		{"an active check script for another interpreter", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "script": "#!/usr/bin/python3\nprint(1)"}}), "spec.activeChecks[0]", "runs under bash"},
		{"an active check every 0 minutes", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "JailWritable", "intervalMinutes": 0}}), "spec.activeChecks[0].intervalMinutes", "greater than or equal to 1"},
		{"an active check named in capitals", setTo("spec.activeChecks", []any{map[string]any{"name": "GPU", "program": "GPUErrors"}}), "spec.activeChecks[0].name", "should match"},
		{"two active checks of one name", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "GPUErrors"}, map[string]any{"name": "a", "program": "DCGMDiag"}}), "spec.activeChecks[1]", "Duplicate value"},
		{"an active check that reboots", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "GPUErrors", "onFailure": "Reboot"}}), "spec.activeChecks[0].onFailure", "Unsupported value"},
		{"an image for a check run as a Slurm job", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "script": "true", "image": "dcgm:4"}}), "spec.activeChecks[0].image", "runAs KubernetesJob"},
		{"a Kubernetes Job check that needs the jail", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "JailWritable", "runAs": "KubernetesJob"}}), "spec.activeChecks[0].runAs", "JailWritable needs the jail"},
		{"a Kubernetes Job check between pairs", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "MPIAllReduce", "runAs": "KubernetesJob"}}), "spec.activeChecks[0].runAs", "across workers under Slurm"},
		{"an active check run by cron", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "script": "true", "runAs": "CronJob"}}), "spec.activeChecks[0].runAs", "Unsupported value"},
		{"a DCGM level of 5", setTo("spec.activeChecks", []any{map[string]any{"name": "a", "program": "DCGMDiag", "dcgmLevel": 5}}), "spec.activeChecks[0].dcgmLevel", "less than or equal to 4"},
		{"a health check interval of 5 seconds", setTo("spec.periodicChecks", map[string]any{"intervalSeconds": 5}), "spec.periodicChecks.intervalSeconds", "greater than or equal to 10"},
		{"an unknown health check", setTo("spec.periodicChecks", map[string]any{"checks": []any{"Disk"}}), "spec.periodicChecks.checks[0]", "Unsupported value"},
		{"a drain on the Ready condition", setTo("spec.slurmNodes.worker.drainOnNodeConditions", []any{"KernelDeadlock", "Ready"}), "spec.slurmNodes.worker.drainOnNodeConditions", "Ready is followed already"},
		{"a drain condition type with a space", setTo("spec.slurmNodes.worker.drainOnNodeConditions", []any{"Kernel Deadlock"}), "spec.slurmNodes.worker.drainOnNodeConditions[0]", "should match"},
		{"an ssh admin group with a space (one pam_listfile line each)", setTo("spec.slurmNodes.worker.ssh.adminGroups", []any{"hpc admins"}), "spec.slurmNodes.worker.ssh.adminGroups[0]", "should match"},
		{"an ssh admin group named twice", setTo("spec.slurmNodes.worker.ssh.adminGroups", []any{"ops", "ops"}), "spec.slurmNodes.worker.ssh.adminGroups[1]", "Duplicate value"},
		{"ssh.requireJob that is not a boolean", setTo("spec.slurmNodes.worker.ssh.requireJob", "yes"), "spec.slurmNodes.worker.ssh.requireJob", "must be of type boolean"},
		{"a name too long to prefix child objects", setTo("metadata.name", strings.Repeat("a", 41)), "metadata.name", "at most 40"},
		{"a name with a dot (no valid Service name)", setTo("metadata.name", "team.a"), "metadata.name", "DNS label"},
		{"a name starting with a digit", setTo("metadata.name", "1cluster"), "metadata.name", "DNS label"},
		{"a jail sub-mount over /etc/slurm", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "/etc/slurm"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "/etc/slurm"},
		{"a jail sub-mount over slurmd's spool", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "/var/spool/slurmd/x"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "system directory"},
		{"a jail sub-mount at /proc/ with a trailing slash", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "/proc/"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "written plainly"},
		{"a jail sub-mount at //etc", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "//etc"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "written plainly"},
		{"a jail sub-mount at /./usr", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "/./usr"), "spec.slurmNodes.worker.volumes.jailSubMounts[0].mountPath", "written plainly"},
		{"a jail sub-mount name too long for its volume name", setTo("spec.slurmNodes.worker.volumes.jailSubMounts[0].name", strings.Repeat("a", 50)), "spec.slurmNodes.worker.volumes.jailSubMounts[0].name", "49"},
	}
}

// samplePaths lists the manifests in config/samples.
func samplePaths() ([]string, error) {
	return filepath.Glob("../../config/samples/*.yaml")
}

// seedManifests builds one manifest from each YAML snippet of the seed document, placed where
// the document puts it.
func seedManifests() (map[string]map[string]any, error) {
	read := func(name string) (map[string]any, error) {
		data, err := os.ReadFile(filepath.Join("testdata", "seed", name))
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, yaml.Unmarshal(data, &m)
	}
	out := map[string]map[string]any{}
	volumeSources, err := read("volume-sources.yaml")
	if err != nil {
		return nil, err
	}
	for _, snippet := range []struct{ file, at string }{
		{"login-volumes.yaml", "spec.slurmNodes.login"},
		{"worker-volumes.yaml", "spec.slurmNodes.worker"},
		{"login-ssh-keys.yaml", "spec.slurmNodes.login"},
		{"accounting-mariadb.yaml", "spec.slurmNodes.accounting"},
		{"volume-sources.yaml", "spec"},
	} {
		s, err := read(snippet.file)
		if err != nil {
			return nil, err
		}
		obj := baseManifest()
		setTo("spec.volumeSources", volumeSources["volumeSources"])(obj)
		setTo("spec.slurmNodes.worker.volumes.jailSubMounts", nil)(obj)
		setTo("spec.slurmNodes.login.volumes.jailSubMounts", nil)(obj)
		for k, v := range s {
			setTo(snippet.at+"."+k, v)(obj)
		}
		setTo("metadata.name", strings.TrimSuffix(snippet.file, ".yaml"))(obj)
		out[snippet.file] = obj
	}
	return out, nil
}

func mustYAML(s string) map[string]any {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	return m
}

// setTo returns an edit that sets the value at a dotted path such as "spec.a[0].b", creating
// maps on the way. A nil value deletes the key.
func setTo(path string, value any) func(map[string]any) {
	return func(obj map[string]any) {
		parts := strings.Split(path, ".")
		var cur any = obj
		for i, p := range parts {
			key, idx := splitIndex(p)
			m := cur.(map[string]any)
			last := i == len(parts)-1
			if idx < 0 {
				if last {
					if value == nil {
						delete(m, key)
					} else {
						m[key] = value
					}
					return
				}
				if _, ok := m[key]; !ok {
					m[key] = map[string]any{}
				}
				cur = m[key]
				continue
			}
			list := m[key].([]any)
			if last {
				list[idx] = value
				return
			}
			cur = list[idx]
		}
	}
}

func deleteAt(path string) func(map[string]any) { return setTo(path, nil) }

func splitIndex(p string) (string, int) {
	open := strings.Index(p, "[")
	if open < 0 {
		return p, -1
	}
	n, err := strconv.Atoi(strings.TrimSuffix(p[open+1:], "]"))
	if err != nil {
		panic(fmt.Sprintf("bad path element %q", p))
	}
	return p[:open], n
}
