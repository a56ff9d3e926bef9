package controller

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The controller reaches the renderers through render (the objects, and the few inputs it
// prepares) and base (the shared labels and input types) only: what one component renders
// stays that component's business.
func TestTheControllerImportsOnlyRenderAndBase(t *testing.T) {
	const module = "github.com/slurm-k8s/slurm-operator/internal/render"
	allowed := map[string]bool{module: true, module + "/base": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module) && !allowed[path] {
				t.Errorf("%s imports %s: reach it through render or base", f, path)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no file of the controller was read")
	}
}
