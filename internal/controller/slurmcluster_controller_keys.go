package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/keys"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// ensureKeys puts the cluster's keys into the scope. A lost munge key of a cluster that ran
// halts the reconcile: nothing is rendered with a key the daemons do not share, and the
// operator looks again for the restore.
func (r *SlurmClusterReconciler) ensureKeys(ctx context.Context, s *reconcileScope) error {
	k, err := r.keysFor(ctx, s.desired)
	var lost *mungeKeyLostError
	if errors.As(err, &lost) {
		s.facts.renderErr, s.facts.renderReason = lost, slurmv1alpha1.ReasonMungeKeyMissing
		s.requeueAfter = 30 * time.Second
		return errHalt
	}
	s.keys = k
	return err
}

// keysFor returns the cluster's keys: the data of the existing Secrets when they exist, and
// new keys only for Secrets that do not. A key in an existing Secret is never replaced, so the
// munge key, host keys and passwords survive every reconcile and operator restart.
func (r *SlurmClusterReconciler) keysFor(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (base.Keys, error) {
	var k base.Keys
	var err error
	generateMunge := keys.Munge
	ran, err := r.hasRun(ctx, sc)
	if err != nil {
		return k, err
	}
	if ran {
		// Daemons of this cluster run with a key: a new one would split the cluster (pods that
		// restart get it, running daemons keep theirs).
		generateMunge = func() ([]byte, error) { return nil, &mungeKeyLostError{secret: sc.MungeKeySecretName()} }
	}
	if k.Munge, err = r.secretKey(ctx, sc, sc.MungeKeySecretName(), slurmfacts.MungeKeyFile, generateMunge); err != nil {
		return k, fmt.Errorf("munge key: %w", err)
	}
	if k.JWT, err = r.secretKey(ctx, sc, sc.JWTKeySecretName(), slurmfacts.JWTKeyFile, keys.JWT); err != nil {
		return k, fmt.Errorf("jwt key: %w", err)
	}
	if k.SSHHost, err = r.sshHostKeys(ctx, sc); err != nil {
		return k, fmt.Errorf("ssh host keys: %w", err)
	}
	if mo := sc.Spec.SlurmNodes.Accounting.MariadbOperator; sc.Spec.SlurmNodes.Accounting.Enabled && mo != nil && mo.Enabled {
		if k.DatabasePassword, err = r.secretKey(ctx, sc, sc.DatabasePasswordSecretName(), base.DatabasePasswordKey, keys.Password); err != nil {
			return k, fmt.Errorf("database password: %w", err)
		}
	}
	return k, nil
}

// secretKey returns data[key] of the named Secret, or a new value from generate when the Secret
// does not exist. A Secret that exists without the key is an error: the operator will not
// overwrite a Secret someone else changed.
func (r *SlurmClusterReconciler) secretKey(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, name, key string, generate func() ([]byte, error)) ([]byte, error) {
	s, found, err := r.getSecret(ctx, sc.Namespace, name)
	if err != nil {
		return nil, err
	}
	if !found {
		return generate()
	}
	v, ok := s.Data[key]
	if !ok || len(v) == 0 {
		return nil, fmt.Errorf("secret %s/%s exists but has no %q: restore the key from a backup (docs/install.md)", sc.Namespace, name, key)
	}
	return v, nil
}

// mungeKeyLostError is a cluster whose daemons ran with a munge key that is gone.
type mungeKeyLostError struct{ secret string }

func (e *mungeKeyLostError) Error() string {
	return "the munge key Secret " + e.secret + " is gone, but this cluster's daemons run with its key: a new key would split " +
		"the cluster, so none is made. Restore the Secret from a backup, or start over with a new key (docs/install.md)"
}

// hasRun says whether the cluster's Slurm daemons were ever created: its slurmctld StatefulSet
// exists.
func (r *SlurmClusterReconciler) hasRun(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (bool, error) {
	return r.getOptional(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.ComponentName(slurmv1alpha1.ComponentController)}, &appsv1.StatefulSet{})
}

func (r *SlurmClusterReconciler) sshHostKeys(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (map[string][]byte, error) {
	s, found, err := r.getSecret(ctx, sc.Namespace, sc.SSHHostKeysSecretName())
	if err != nil {
		return nil, err
	}
	if found && len(s.Data) > 0 {
		return s.Data, nil
	}
	return keys.SSHHost()
}

// getSecret reads a Secret from the cache, and confirms a miss with a direct read: the cache
// holds only Secrets with the operator's label, and a key must never be regenerated because a
// label was removed.
func (r *SlurmClusterReconciler) getSecret(ctx context.Context, namespace, name string) (*corev1.Secret, bool, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	s := &corev1.Secret{}
	found, err := r.getOptional(ctx, key, s)
	if err != nil || found {
		return s, found, err
	}
	err = r.APIReader.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	return s, err == nil, err
}
