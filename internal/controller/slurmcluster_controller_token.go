package controller

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// DefaultExporterTokenLifetime is how long the exporter's token is valid. The operator renews
// it when half of that is left, so a renewal has half a lifetime to reach the exporter (the
// kubelet updates a mounted Secret within about a minute) and to survive an operator outage.
const DefaultExporterTokenLifetime = time.Hour

// exporterToken puts the exporter's token into the scope: the one in the exporter's token
// Secret while it is signed with the cluster's key, names slurmfacts.MetricsUser and has more
// than half its lifetime left; a new one otherwise. It sets when to look again to renew it.
// A cluster without the exporter has no token.
func (r *SlurmClusterReconciler) exporterToken(ctx context.Context, s *reconcileScope) error {
	sc := s.desired
	if !sc.Spec.SlurmNodes.Exporter.Enabled || len(s.keys.JWT) == 0 {
		return nil
	}
	lifetime := r.ExporterTokenLifetime
	if lifetime <= 0 {
		lifetime = DefaultExporterTokenLifetime
	}
	now := time.Now()
	tok, renewAt, why := "", time.Time{}, "none yet"
	secret, found, err := r.getSecret(ctx, sc.Namespace, sc.ExporterTokenSecretName())
	if err != nil {
		return err
	}
	if found {
		old := string(secret.Data[base.ExporterTokenKey])
		c, err := slurm.VerifyToken(s.keys.JWT, old)
		lifetimeLeft := c.Expires.Sub(now)
		switch {
		case err != nil:
			why = err.Error()
		case c.User != slurmfacts.MetricsUser:
			why = "it names " + c.User
		case lifetimeLeft <= lifetime/2:
			why = fmt.Sprintf("it expires in %s", lifetimeLeft.Round(time.Second))
		default:
			tok, renewAt = old, c.Expires.Add(-lifetime/2)
		}
	}
	if tok == "" {
		if tok, err = slurm.Token(s.keys.JWT, slurmfacts.MetricsUser, now, lifetime); err != nil {
			return fmt.Errorf("the exporter's token: %w", err)
		}
		renewAt = now.Add(lifetime / 2)
		log.FromContext(ctx).Info("new exporter token", "user", slurmfacts.MetricsUser, "lifetime", lifetime, "previous", why)
	}
	s.keys.ExporterToken = []byte(tok)
	s.renewIn = max(renewAt.Sub(now), time.Second)
	return nil
}

// lookAgainBy returns res looking again no later than in (when in is positive).
func lookAgainBy(res ctrl.Result, in time.Duration) ctrl.Result {
	if in > 0 && (res.RequeueAfter == 0 || in < res.RequeueAfter) {
		res.RequeueAfter = in
	}
	return res
}
