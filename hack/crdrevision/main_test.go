package main

import (
	"strings"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/crdupgrade"
)

const generated = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.23.0
  name: slurmclusters.slurm.hpc.dev
spec:
  group: slurm.hpc.dev
`

func revisionOf(t *testing.T, data []byte) (int, string) {
	t.Helper()
	rev, digest, err := annotations(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return rev, digest
}

// The revision counts up when, and only when, controller-gen writes something else.
func TestNumberCountsUpOnlyOnAChange(t *testing.T) {
	first, err := number([]byte(generated), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	rev, digest := revisionOf(t, first)
	if rev != 1 || len(digest) != 64 {
		t.Fatalf("a first CRD: revision %d, digest %q\n%s", rev, digest, first)
	}
	// make manifests again: the same CRD, whether or not it already carries the annotations.
	for name, in := range map[string][]byte{"freshly generated": []byte(generated), "already numbered": first} {
		again, err := number(in, rev, digest)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(first) {
			t.Errorf("%s: numbered again differently:\n%s\nwant:\n%s", name, again, first)
		}
	}
	changed, err := number([]byte(strings.Replace(generated, "group: slurm.hpc.dev", "group: slurm.hpc.dev\n  scope: Namespaced", 1)), rev, digest)
	if err != nil {
		t.Fatal(err)
	}
	if rev2, digest2 := revisionOf(t, changed); rev2 != 2 || digest2 == digest {
		t.Errorf("a changed CRD: revision %d (digest changed: %t), want 2", rev2, digest2 != digest)
	}
	if _, err := number([]byte("kind: CustomResourceDefinition\nmetadata:\n  name: x\n"), 0, ""); err == nil {
		t.Error("a CRD without metadata.annotations was numbered")
	}
}

// A revision that is not a number is an error, not revision 0 (which would let any manager
// replace the CRD).
func TestRevisionRefusesAGarbledAnnotation(t *testing.T) {
	bad := strings.Replace(generated, "    controller-gen", "    "+crdupgrade.RevisionAnnotation+": \"two\"\n    controller-gen", 1)
	if _, _, err := annotations([]byte(bad)); err == nil || !strings.Contains(err.Error(), crdupgrade.RevisionAnnotation) {
		t.Errorf("a garbled revision: %v", err)
	}
}
