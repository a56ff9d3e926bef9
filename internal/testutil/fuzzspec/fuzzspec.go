// Package fuzzspec helps fuzz targets of renderers: it builds SlurmClusters from the samples,
// keeps only those the API server would accept, and compares the shape of rendered files. It
// is for tests only.
package fuzzspec

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/crdvalidate"
)

// Specs makes SlurmClusters from one sample, as the API server would accept them.
type Specs struct {
	validator *crdvalidate.Validator
	sample    []byte
}

// New loads the generated CRD and the sample config/samples/NAME.yaml.
func New(tb testing.TB, sample string) *Specs {
	tb.Helper()
	v, err := crdvalidate.Load(filepath.Join(fixtures.RepoRoot(), "config", "crd", "bases", "slurm.hpc.dev_slurmclusters.yaml"), "v1alpha1")
	if err != nil {
		tb.Fatal(err)
	}
	sc, err := fixtures.Sample(sample)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := json.Marshal(sc)
	if err != nil {
		tb.Fatal(err)
	}
	return &Specs{validator: v, sample: b}
}

// Accepted returns the sample changed by edit (on its JSON form, spec fields by path), with
// the API's and the operator's defaults, or false when the API server would refuse it.
func (s *Specs) Accepted(t *testing.T, edit func(spec map[string]any)) (*slurmv1alpha1.SlurmCluster, bool) {
	t.Helper()
	obj := map[string]any{}
	if err := json.Unmarshal(s.sample, &obj); err != nil {
		t.Fatal(err)
	}
	edit(obj["spec"].(map[string]any))
	s.validator.Default(obj)
	if errs := s.validator.Validate(obj, nil); len(errs) > 0 {
		return nil, false
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	sc := &slurmv1alpha1.SlurmCluster{}
	if err := json.Unmarshal(b, sc); err != nil {
		return nil, false // a value the typed API cannot hold is refused by the API server too
	}
	return base.WithDefaults(sc), true
}

// Sub returns m[key] as an object, made when missing.
func Sub(m map[string]any, key string) map[string]any {
	if v, ok := m[key].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[key] = v
	return v
}

// SameShape fails unless got has the lines of want, each line setting what the same line of
// want sets (the text before '=' or the first space); a comment in got sets nothing and may
// stand anywhere.
func SameShape(t *testing.T, file, got, want string) {
	t.Helper()
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(g) != len(w) {
		t.Fatalf("%s: %d lines, want %d:\n%s", file, len(g), len(w), got)
	}
	key := func(l string) string {
		if i := strings.IndexAny(l, "= "); i >= 0 {
			return l[:i]
		}
		return l
	}
	for i := range g {
		if strings.ContainsRune(g[i], '\r') {
			t.Fatalf("%s: a carriage return in line %d: %q", file, i+1, g[i])
		}
		if g[i] == w[i] || strings.HasPrefix(strings.TrimSpace(g[i]), "#") {
			continue
		}
		if key(g[i]) != key(w[i]) || strings.HasPrefix(w[i], "#") {
			t.Fatalf("%s line %d: %q where the same spec with harmless values has %q", file, i+1, g[i], w[i])
		}
	}
}
