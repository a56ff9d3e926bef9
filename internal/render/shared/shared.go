// Package shared renders the objects every component uses: the munge key, SSH host key and JWT
// key Secrets (from keys the controller generated once), and the Slurm config ConfigMap.
package shared

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// MungeKeySecret holds the munge key.
func MungeKeySecret(in base.Input) *corev1.Secret {
	return base.Secret(base.SharedObjectMeta(in.Cluster, in.Cluster.MungeKeySecretName()), map[string][]byte{slurmfacts.MungeKeyFile: in.Keys.Munge})
}

// JWTKeySecret holds the HS256 key for JWT authentication.
func JWTKeySecret(in base.Input) *corev1.Secret {
	return base.Secret(base.SharedObjectMeta(in.Cluster, in.Cluster.JWTKeySecretName()), map[string][]byte{slurmfacts.JWTKeyFile: in.Keys.JWT})
}

// SSHHostKeysSecret holds the SSH host keys shared by the login and worker nodes, so a user's
// known_hosts entry stays valid across pod restarts and across nodes.
func SSHHostKeysSecret(in base.Input) *corev1.Secret {
	data := make(map[string][]byte, len(in.Keys.SSHHost))
	for k, v := range in.Keys.SSHHost {
		data[k] = v
	}
	return base.Secret(base.SharedObjectMeta(in.Cluster, in.Cluster.SSHHostKeysSecretName()), data)
}

// SlurmConfigMap holds slurm.conf (layered), gres.conf, cgroup.conf and plugstack.conf.
func SlurmConfigMap(in base.Input) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   base.TypeMeta("v1", "ConfigMap"),
		ObjectMeta: base.SharedObjectMeta(in.Cluster, in.Cluster.ConfigMapName()),
		Data:       slurmconf.Files(in),
	}
}

// SortedKeys returns the keys of a map in order (used for deterministic output).
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// IdentityConfigMap holds what the jail and slurmctld need to resolve the directory's users
// (spec.identity): nil without it.
func IdentityConfigMap(in base.Input) *corev1.ConfigMap {
	if !in.Cluster.SSSDEnabled() {
		return nil
	}
	return &corev1.ConfigMap{
		TypeMeta:   base.TypeMeta("v1", "ConfigMap"),
		ObjectMeta: base.SharedObjectMeta(in.Cluster, in.Cluster.IdentityConfigMapName()),
		Data:       base.IdentityFiles(in.Cluster),
	}
}
