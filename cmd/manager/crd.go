package main

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/slurm-k8s/slurm-operator/config/crd"
	"github.com/slurm-k8s/slurm-operator/internal/crdupgrade"
)

// ensureCRD updates the served SlurmCluster CRD to the one built into this manager when that is
// newer (--upgrade-crd), before any controller reads a SlurmCluster.
func ensureCRD(cfg *rest.Config) error {
	want, err := crdupgrade.Parse(crd.SlurmClusters)
	if err != nil {
		return err
	}
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := crdupgrade.Ensure(ctx, c, want)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info(o.String())
	return nil
}
