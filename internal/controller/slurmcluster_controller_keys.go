package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/keys"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// ensureKeys puts the cluster's keys into the scope. A lost key of a cluster that ran (the
// munge key, the JWT key, the SSH host keys) halts the reconcile: nothing is rendered with a key
// the daemons or the users' ssh clients do not share, and the operator looks again for the
// restore.
func (r *SlurmClusterReconciler) ensureKeys(ctx context.Context, s *reconcileScope) error {
	k, err := r.keysFor(ctx, s.desired)
	var lost *keysLostError
	if errors.As(err, &lost) {
		s.facts.renderErr, s.facts.renderReason = lost, lost.reason()
		s.requeueAfter = 30 * time.Second
		r.keysLostEvent(s.cluster, lost)
		return errHalt
	}
	if err != nil {
		return err
	}
	if s.desired.SSSDEnabled() {
		hash, reason, why, err := r.sssdConfigHash(ctx, s.desired)
		if err != nil {
			return err
		}
		if why != "" {
			last, err := r.lastSSSDConfigHash(ctx, s.desired)
			if err != nil {
				return err
			}
			if last == "" {
				// Never rendered: every pod that runs SSSD would wait for a Secret volume.
				s.facts.renderErr, s.facts.renderReason = errors.New(why), reason
				s.requeueAfter = 30 * time.Second
				return errHalt
			}
			// The pods run with the Secret they mounted: the rest of the cluster goes on
			// (scaling, rolls, busy labels), rendered with the hash they have.
			s.facts.identityErr, s.facts.identityReason = why, reason
			hash = last
		}
		k.SSSDConfigHash = hash
	}
	s.keys = k
	return nil
}

// lastSSSDConfigHash is the Secret's hash the controller StatefulSet was last rendered with
// (the Secret's part of its pod template's annotation, kept in its own annotation), or empty.
func (r *SlurmClusterReconciler) lastSSSDConfigHash(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (string, error) {
	sts := &appsv1.StatefulSet{}
	found, err := r.getOptional(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.ComponentName(slurmv1alpha1.ComponentController)}, sts)
	if err != nil || !found {
		return "", err
	}
	return sts.Annotations[base.AnnotationSSSDSecretHash], nil
}

// sssdConfigHash reads the admin's SSSD Secret (spec.identity.sssd.configSecretName) and
// returns the hash of its data, which rolls the pods that run SSSD when it changes. A Secret
// that is missing, lacks sssd.conf, holds one the pods cannot use (base.CheckSSSDConfig) or is
// not labelled for SlurmClusters to read gives a reason and a message that names the field
// instead.
func (r *SlurmClusterReconciler) sssdConfigHash(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (hash, reason, why string, err error) {
	const field = "spec.identity.sssd.configSecretName"
	name := sc.Spec.Identity.SSSD.ConfigSecretName
	s := &corev1.Secret{}
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return "", slurmv1alpha1.ReasonIdentitySecretMissing, "Secret " + name + " (" + field + ") does not exist: create it with SSSD's configuration in key " + base.SSSDConfigKey, nil
	case err != nil:
		return "", "", "", err
	case s.Labels[slurmv1alpha1.LabelAllowReference] != "true":
		return "", slurmv1alpha1.ReasonIdentitySecretNotAllowed, "Secret " + name + " (" + field + ") is not labelled " + slurmv1alpha1.LabelAllowReference + "=true: label it to let SlurmClusters read it", nil
	case len(s.Data[base.SSSDConfigKey]) == 0:
		return "", slurmv1alpha1.ReasonIdentitySecretMissing, "Secret " + name + " (" + field + ") has no key " + base.SSSDConfigKey + " with SSSD's configuration", nil
	}
	if bad := base.CheckSSSDConfig(s.Data[base.SSSDConfigKey], sc.SSSDSSHKeys()); bad != nil {
		return "", slurmv1alpha1.ReasonIdentitySecretInvalid, "Secret " + name + " (" + field + ") key " + base.SSSDConfigKey + ": " + bad.Error(), nil
	}
	var parts [][]byte
	for _, k := range slices.Sorted(maps.Keys(s.Data)) {
		parts = append(parts, []byte(k), s.Data[k])
	}
	return slurmv1alpha1.ShortHash(parts...), "", "", nil
}

// keysLostEvent records the loss when the Degraded condition is True already for something
// else (a missing optional API): conditionEvents records a condition only when its status
// changes, and the admin would learn of the lost key from the status alone. When Degraded turns
// True, conditionEvents records this same note, so this records nothing.
func (r *SlurmClusterReconciler) keysLostEvent(sc *slurmv1alpha1.SlurmCluster, lost *keysLostError) {
	c := meta.FindStatusCondition(sc.Status.Conditions, slurmv1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason == lost.reason() && strings.HasPrefix(c.Message, lost.Error()) {
		return
	}
	r.event(sc, corev1.EventTypeWarning, lost.reason(), slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ConditionDegraded+" is True: "+lost.Error())
}

// keysFor returns the cluster's keys: the data of the existing Secrets when they exist, and
// new keys only for Secrets that do not. A key in an existing Secret is never replaced, so the
// munge key, host keys and passwords survive every reconcile and operator restart. For a
// cluster that ran, a missing munge key, JWT key or SSH host keys Secret is a *keysLostError
// naming every one that is gone, and no key is made.
func (r *SlurmClusterReconciler) keysFor(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (base.Keys, error) {
	var k base.Keys
	var err error
	generateMunge, generateJWT, generateSSH := keys.Munge, keys.JWT, keys.SSHHost
	ran, err := r.hasRun(ctx, sc)
	if err != nil {
		return k, err
	}
	lost := &keysLostError{}
	if ran {
		// Each of these keys is held outside its Secret once the cluster ran, and a new one
		// would not reach its holders: daemons read their keys when they start, and users'
		// ssh clients remember host keys. The status says what to restore instead.
		generateMunge = lost.refuse(lostMungeKey(sc))
		generateJWT = lost.refuse(lostJWTKey(sc))
		generateSSH = func() (map[string][]byte, error) {
			lost.keys = append(lost.keys, lostSSHHostKeys(sc))
			return nil, nil
		}
	}
	if k.Munge, err = r.secretKey(ctx, sc, sc.MungeKeySecretName(), slurmfacts.MungeKeyFile, generateMunge); err != nil {
		return k, fmt.Errorf("munge key: %w", err)
	}
	if k.JWT, err = r.secretKey(ctx, sc, sc.JWTKeySecretName(), slurmfacts.JWTKeyFile, generateJWT); err != nil {
		return k, fmt.Errorf("jwt key: %w", err)
	}
	if k.SSHHost, err = r.sshHostKeys(ctx, sc, generateSSH); err != nil {
		return k, fmt.Errorf("ssh host keys: %w", err)
	}
	if len(lost.keys) > 0 {
		return k, lost
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

// sshHostKeys returns the data of the SSH host keys Secret, or new keys from generate when the
// Secret does not exist. Like secretKey, a Secret that exists with no data is an error: new
// keys written over it would change the hosts users' ssh clients know.
func (r *SlurmClusterReconciler) sshHostKeys(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, generate func() (map[string][]byte, error)) (map[string][]byte, error) {
	s, found, err := r.getSecret(ctx, sc.Namespace, sc.SSHHostKeysSecretName())
	if err != nil {
		return nil, err
	}
	if !found {
		return generate()
	}
	if len(s.Data) == 0 {
		return nil, fmt.Errorf("secret %s/%s exists but holds no host keys: restore the keys from a backup (docs/install.md)", sc.Namespace, sc.SSHHostKeysSecretName())
	}
	return s.Data, nil
}

// hasRun says whether the cluster's Slurm daemons were ever created: its slurmctld StatefulSet
// exists.
func (r *SlurmClusterReconciler) hasRun(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (bool, error) {
	return r.getOptional(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.ComponentName(slurmv1alpha1.ComponentController)}, &appsv1.StatefulSet{})
}

// lostKey is a key Secret of a cluster that ran which is gone: the condition reason, and a
// message that names the Secret, says what a new key would break, and how to recover.
type lostKey struct{ reason, message string }

// keysLostError lists the key Secrets of a cluster that ran which are gone, in the order
// keysFor reads them: the munge key, whose loss is the most fundamental, first.
type keysLostError struct{ keys []lostKey }

func (e *keysLostError) Error() string {
	msgs := make([]string, len(e.keys))
	for i, k := range e.keys {
		msgs[i] = k.message
	}
	return strings.Join(msgs, "; ")
}

// reason is the condition reason of the first key lost.
func (e *keysLostError) reason() string { return e.keys[0].reason }

// refuse is a generator that records the loss of l and makes no key.
func (e *keysLostError) refuse(l lostKey) func() ([]byte, error) {
	return func() ([]byte, error) {
		e.keys = append(e.keys, l)
		return nil, nil
	}
}

// restartController is how to accept a new JWT key or new SSH host keys knowingly: without
// the controller StatefulSet the cluster counts as new (hasRun), and the operator makes every
// missing key and the StatefulSet again. slurmctld starts again from its saved state; running
// jobs go on.
func restartController(sc *slurmv1alpha1.SlurmCluster) string {
	return "kubectl delete statefulset -n " + sc.Namespace + " " + sc.ComponentName(slurmv1alpha1.ComponentController) +
		" (slurmctld restarts from its saved state; jobs go on)"
}

func lostMungeKey(sc *slurmv1alpha1.SlurmCluster) lostKey {
	return lostKey{slurmv1alpha1.ReasonMungeKeyMissing, "the munge key Secret " + sc.MungeKeySecretName() + " is gone, but this cluster's " +
		"daemons run with its key: a new key would split the cluster, so none is made. Restore the Secret from a backup, or " +
		"start over with a new key (docs/install.md)"}
}

func lostJWTKey(sc *slurmv1alpha1.SlurmCluster) lostKey {
	return lostKey{slurmv1alpha1.ReasonJWTKeyMissing, "the JWT key Secret " + sc.JWTKeySecretName() + " is gone, but this cluster's " +
		"slurmctld and slurmdbd run with its key: they would refuse every token signed with a new key (the operator's, the " +
		"exporter's), so none is made. Restore the Secret from a backup (docs/install.md), or accept a new key: " +
		"" + restartController(sc) + ", then delete the slurmdbd and exporter pods so that they read it"}
}

func lostSSHHostKeys(sc *slurmv1alpha1.SlurmCluster) lostKey {
	return lostKey{slurmv1alpha1.ReasonSSHHostKeysMissing, "the SSH host keys Secret " + sc.SSHHostKeysSecretName() + " is gone, but " +
		"this cluster's login and worker nodes present its keys: users' ssh clients would refuse new ones as a changed host, so " +
		"none are made. Restore the Secret from a backup (docs/install.md), or accept new keys: " +
		restartController(sc) + "; login and worker pods present them once restarted, and users must remove the old ones from " +
		"their known_hosts"}
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
