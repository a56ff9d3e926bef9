package render

import (
	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/accounting"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmctld"
)

// What the controller needs from the renderers besides the objects: the inputs it prepares
// (the database) and where it reaches what they render (slurmrestd). The controller imports
// only this package and base.

// Database says where slurmdbd's database is, with this password (the external database's,
// read from the user's Secret, or the generated one). It refuses a password that cannot be
// written into slurmdbd.conf; the error names the kinds of character, never the password's.
func Database(sc *slurmv1alpha1.SlurmCluster, password []byte) (base.Database, error) {
	if err := slurmconf.CheckValue(string(password)); err != nil {
		return base.Database{}, err
	}
	return accounting.DatabaseFor(sc, password), nil
}

// RestdURL is where the operator reaches the cluster's slurmrestd.
func RestdURL(sc *slurmv1alpha1.SlurmCluster, clusterDomain string) string {
	if clusterDomain == "" {
		clusterDomain = base.DefaultClusterDomain
	}
	return slurmctld.RestdURL(sc, clusterDomain)
}

// Warnings are the spec's values the render did not use, each naming its field and what was
// used instead (a scheduling default with which a whole-node job could not start). The
// controller reports them in the Degraded condition; the cluster is rendered all the same.
func Warnings(in base.Input) []string {
	_, warnings := slurmconf.Defaults(in)
	return append(warnings, slurmconf.TopologyWarnings(in)...)
}
