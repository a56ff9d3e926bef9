// Package golden compares test output with files under testdata/, and rewrites them when the
// tests run with -update. It is for tests only.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// Check compares got with the golden file at path (relative to the test's package), or
// rewrites the file under -update.
func Check(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run 'make golden' to create it): %v", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the output; run 'make golden' and review the diff.\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
