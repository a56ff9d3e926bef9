package accounting

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// MariaDBAPIVersion is the mariadb-operator API the objects are written for.
const MariaDBAPIVersion = "k8s.mariadb.com/v1alpha1"

// MariaDBConfig is the MariaDB server's configuration Slurm's accounting wants: the buffer pool,
// lock wait and packet size of Slurm's accounting guide, and snapshot isolation off (MariaDB
// 11.6 and later turn it on; slurmdbd 26.05 warns that a write conflict then stops it). The
// "loose-" prefix lets a MariaDB older than 11.6, which has no such variable, start all the same.
const MariaDBConfig = "[mariadb]\ninnodb_buffer_pool_size=1024M\ninnodb_lock_wait_timeout=900\nmax_allowed_packet=256M\n" +
	"loose-innodb_snapshot_isolation=OFF\n"

// MariaDBObjects renders the MariaDB server, the accounting Database, its User and the Grant.
func MariaDBObjects(in base.Input) ([]*unstructured.Unstructured, error) {
	sc := in.Cluster
	mo := sc.Spec.SlurmNodes.Accounting.MariadbOperator
	name := sc.MariaDBName()
	ref := map[string]any{"name": name}

	mariadbSpec := map[string]any{
		"rootPasswordSecretKeyRef": map[string]any{"name": sc.MariaDBRootPasswordSecretName(), "key": "password", "generate": true},
		"port":                     int64(slurmfacts.MariaDBPort),
		"myCnf":                    MariaDBConfig,
	}
	storage := map[string]any{}
	if mo.Storage.VolumeClaimTemplate != nil {
		vct, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mo.Storage.VolumeClaimTemplate)
		if err != nil {
			return nil, err
		}
		storage["volumeClaimTemplate"] = vct
	} else {
		storage["size"] = "10Gi"
	}
	mariadbSpec["storage"] = storage
	if len(mo.Resources.Limits) > 0 || len(mo.Resources.Requests) > 0 {
		r := mo.Resources.Core()
		res, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
		if err != nil {
			return nil, err
		}
		mariadbSpec["resources"] = res
	}
	// The images' registry credentials, for a site that mirrors MariaDB's image with its own.
	if ps := sc.Spec.Images.PullSecrets; len(ps) > 0 {
		var refs []any
		for _, s := range ps {
			refs = append(refs, map[string]any{"name": s.Name})
		}
		mariadbSpec["imagePullSecrets"] = refs
	}
	if in.ControlPlanePriorityClass != "" {
		mariadbSpec["priorityClassName"] = in.ControlPlanePriorityClass
	}
	// Placed as slurmdbd is, by the accounting node filter: its selector, node affinity and
	// tolerations.
	if name := sc.Spec.SlurmNodes.Accounting.K8sNodeFilterName; name != "" {
		if nf := base.NodeFilter(sc, name); nf != nil {
			if len(nf.NodeSelector) > 0 {
				mariadbSpec["nodeSelector"] = base.Unstructured(nf.NodeSelector)
			}
			if a := nf.Affinity.Core(); a != nil {
				na, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a.NodeAffinity)
				if err != nil {
					return nil, err
				}
				mariadbSpec["affinity"] = map[string]any{"nodeAffinity": na}
			}
			if len(nf.Tolerations) > 0 {
				var tols []any
				for i := range nf.Tolerations {
					core := nf.Tolerations[i].Core()
					t, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&core)
					if err != nil {
						return nil, err
					}
					tols = append(tols, t)
				}
				mariadbSpec["tolerations"] = tols
			}
		}
	}
	obj := func(kind, objName string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": MariaDBAPIVersion,
			"kind":       kind,
			"metadata":   map[string]any{"name": objName, "namespace": sc.Namespace, "labels": base.Unstructured(base.Labels(sc, comp))},
			"spec":       spec,
		}}
	}
	return []*unstructured.Unstructured{
		obj("MariaDB", name, mariadbSpec),
		obj("Database", sc.MariaDBDatabaseObjectName(), map[string]any{
			"mariaDbRef": ref, "name": DatabaseName, "characterSet": "utf8mb4", "collate": "utf8mb4_unicode_ci",
		}),
		obj("User", sc.MariaDBUserObjectName(), map[string]any{
			"mariaDbRef": ref, "name": DatabaseUser, "host": "%",
			"passwordSecretKeyRef": map[string]any{"name": sc.DatabasePasswordSecretName(), "key": base.DatabasePasswordKey},
			"maxUserConnections":   int64(100),
		}),
		obj("Grant", sc.MariaDBUserObjectName(), map[string]any{
			"mariaDbRef": ref, "username": DatabaseUser, "host": "%",
			"privileges": []any{"ALL PRIVILEGES"}, "database": DatabaseName, "table": "*",
		}),
	}, nil
}
