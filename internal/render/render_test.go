package render_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/golden"
)

// Each sample renders to one golden file per component: testdata/<sample>/<component>.golden.
// Run 'make golden' (go test ./internal/render/... -update) after a deliberate change.

var samples = []string{
	"slurm_v1alpha1_slurmcluster",
	"slurm_v1alpha1_slurmcluster_minimal",
	"slurm_v1alpha1_slurmcluster_externaldb",
}

func TestEveryComponentMatchesItsGoldenFile(t *testing.T) {
	for _, name := range samples {
		t.Run(name, func(t *testing.T) {
			sc, err := fixtures.Sample(name)
			if err != nil {
				t.Fatal(err)
			}
			parts, err := render.All(fixtures.Input(sc))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				var b bytes.Buffer
				for _, o := range p.Objects {
					y, err := yaml.Marshal(o)
					if err != nil {
						t.Fatal(err)
					}
					b.WriteString("---\n")
					b.Write(y)
				}
				golden.Check(t, filepath.Join("testdata", name, string(p.Component)+".golden"), b.Bytes())
			}
		})
	}
}

func TestRenderingIsDeterministic(t *testing.T) {
	sc, err := fixtures.Sample(samples[0])
	if err != nil {
		t.Fatal(err)
	}
	first := dump(t, fixtures.Input(sc))
	for i := 0; i < 20; i++ {
		if got := dump(t, fixtures.Input(sc)); got != first {
			t.Fatalf("render %d differs from the first", i)
		}
	}
}

func dump(t *testing.T, in base.Input) string {
	t.Helper()
	parts, err := render.All(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, p := range parts {
		for _, o := range p.Objects {
			y, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s\n", y)
		}
	}
	return b.String()
}
