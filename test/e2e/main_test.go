package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	managerOnce sync.Once
	managerPath string
	managerErr  error
)

// managerBinary builds cmd/manager once for the package's tests.
func managerBinary(t *testing.T) string {
	t.Helper()
	managerOnce.Do(func() {
		root, _ := filepath.Abs(filepath.Join("..", ".."))
		dir, err := os.MkdirTemp("", "e2e-manager-")
		if err != nil {
			managerErr = err
			return
		}
		managerPath = filepath.Join(dir, "manager")
		build := exec.Command("go", "build", "-o", managerPath, "./cmd/manager")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			managerErr = fmt.Errorf("build manager: %w\n%s", err, out)
		}
	})
	if managerErr != nil {
		t.Fatal(managerErr)
	}
	return managerPath
}

// syncBuffer collects a process's output from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMain removes the manager binary the package's tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if managerPath != "" {
		_ = os.RemoveAll(filepath.Dir(managerPath))
	}
	os.Exit(code)
}
