package controller

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/reconcile.md lists the phases a reconcile runs; it must name the phases of phases(), in
// their order, so the document cannot drift from the code.
func TestTheReconcileDocumentListsThePhasesInOrder(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "reconcile.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "\n## Phases\n")
	if start < 0 {
		t.Fatal("docs/reconcile.md has no \"## Phases\" section")
	}
	section = section[start+len("\n## Phases\n"):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	item := regexp.MustCompile(`(?m)^\d+\. \*\*([^*]+)\*\*`)
	var documented []string
	for _, m := range item.FindAllStringSubmatch(section, -1) {
		documented = append(documented, strings.ToLower(m[1]))
	}
	var code []string
	for _, p := range (&SlurmClusterReconciler{}).phases() {
		code = append(code, strings.ToLower(p.name))
	}
	if strings.Join(documented, "\n") != strings.Join(code, "\n") {
		t.Fatalf("docs/reconcile.md lists the phases\n  %q\nbut phases() runs\n  %q", documented, code)
	}
}
