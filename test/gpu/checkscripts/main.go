// Command checkscripts writes the batch scripts of the operator's GPU active checks, exactly as
// the operator submits them for a worker with one GPU, so that test/gpu/check.sh can run them
// in a jail on a real GPU machine (which has no Go).
//
//	go run ./test/gpu/checkscripts DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/activecheck"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: checkscripts DIR")
		os.Exit(2)
	}
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{
		{Name: "gpu-errors", Program: slurmv1alpha1.ActiveCheckGPUErrors},
		{Name: "dcgm-diag", Program: slurmv1alpha1.ActiveCheckDCGMDiag},
		{Name: "nccl-allreduce", Program: slurmv1alpha1.ActiveCheckNCCLAllReduce},
	}
	for _, c := range activecheck.FromSpec(sc, 1) {
		p := filepath.Join(os.Args[1], "check-"+c.Name)
		if err := os.WriteFile(p, []byte(c.BatchScript()), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(p)
	}
}
