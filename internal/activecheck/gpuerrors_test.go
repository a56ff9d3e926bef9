package activecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runGPUErrors runs the GPUErrors program with an nvidia-smi and a dmesg that print what the
// case gives (the real ones are run on a GPU machine by test/gpu/check.sh).
func runGPUErrors(t *testing.T, gpus, rows, kernel string, kernelReadable bool) (string, int) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("nvidia-smi", `case "$*" in
*--query-gpu=*) printf '%s\n' "$FAKE_GPUS" ;;
*--query-remapped-rows=*) printf '%s\n' "$FAKE_ROWS" ;;
*) exit 2 ;;
esac
`)
	dmesg := `[ "$1 $2" = "--since -60min" ] || exit 2; printf '%s\n' "$FAKE_KERNEL"` + "\n"
	if !kernelReadable {
		dmesg = "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1\n"
	}
	write("dmesg", dmesg)
	cmd := exec.Command("bash", "-c", gpuErrors)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "WINDOW_MIN=60",
		"FAKE_GPUS=" + gpus, "FAKE_ROWS=" + rows, "FAKE_KERNEL=" + kernel}
	out, err := cmd.CombinedOutput()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), rc
}

func TestGPUErrorsNamesECCRemapsAndXidsPerGPU(t *testing.T) {
	healthyGPUs := "0, 0\n1, 0"
	healthyRows := "00000000:3B:00.0, No, No\n00000000:86:00.0, No, No"
	// As a real driver logs them (the H200 check planted one of these).
	kernel := `[ 12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
[ 12.4] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
[ 13.0] NVRM: Xid (PCI:0000:86:00): 13, pid=99, Graphics Exception (a user's bug, not the GPU's)
[ 14.0] NVRM: Xid (PCI:0000:86:00): 48, pid=99, DBE (double bit error) ECC Error`
	for _, tc := range []struct {
		name, gpus, rows, kernel string
		readable                 bool
		wantRC                   int
		want                     string
	}{
		{"healthy", healthyGPUs, healthyRows, "[ 1.0] nothing of note", true, 0,
			"no uncorrected ECC error, no pending or failed row remap, no Xid"},
		{"the kernel log unreadable", healthyGPUs, healthyRows, "", false, 0,
			"no uncorrected ECC error, no pending or failed row remap, no Xid (the kernel log is not readable here: Xid not checked)"},
		{"Xids counted per code and GPU, harmless codes left out", healthyGPUs, healthyRows, kernel, true, 1,
			"Xid 48 on PCI:0000:86:00 x1, Xid 79 on PCI:0000:3b:00 x2;"},
		{"uncorrected ECC errors", "0, 0\n1, 3", healthyRows, "", true, 1, "GPU 1: 3 uncorrected ECC errors;"},
		{"ECC not supported is no error", "0, [N/A]\n1, [Not Supported]", healthyRows, "", true, 0, "no uncorrected ECC error"},
		{"a pending and a failed row remap", healthyGPUs, "00000000:3B:00.0, Yes, No\n00000000:86:00.0, No, Yes", "", true, 1,
			"GPU 00000000:3B:00.0: a row remap is pending (reset the GPU); GPU 00000000:86:00.0: row remapping failed;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, rc := runGPUErrors(t, tc.gpus, tc.rows, tc.kernel, tc.readable)
			if rc != tc.wantRC || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, printed %q; want exit %d and %q", rc, out, tc.wantRC, tc.want)
			}
		})
	}
}
