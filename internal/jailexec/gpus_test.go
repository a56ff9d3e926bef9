package jailexec

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// gpuRoot is a container root with n GPU device files (empty files stand in: only names are
// read) and, with uuids, the driver's description of each (GPU i at bus 0000:0i:00.0, minor i,
// except where minors says otherwise).
func gpuRoot(t *testing.T, n int, uuids []string, minors map[int]int) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "dev", "nvidiactl"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(root, "dev", "nvidia-uvm"), nil, 0o644))
	for i := 0; i < n; i++ {
		minor := i
		if m, ok := minors[i]; ok {
			minor = m
		}
		must(t, os.WriteFile(filepath.Join(root, "dev", "nvidia"+strconv.Itoa(minor)), nil, 0o644))
		if uuids == nil {
			continue
		}
		dir := filepath.Join(root, driverGPUsDir, "0000:0"+strconv.Itoa(i)+":00.0")
		must(t, os.MkdirAll(dir, 0o755))
		info := "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\nGPU UUID: \t " + uuids[i] + "\nDevice Minor: \t " + strconv.Itoa(minor) + "\nBus Location: \t 0000:0" + strconv.Itoa(i) + ":00.0\n"
		must(t, os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o444))
	}
	return root
}

func TestFindPodGPUs(t *testing.T) {
	uuids := []string{"GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"}
	for _, c := range []struct {
		name    string
		root    string
		visible string
		volumes []string
		want    int
		minors  []int
		others  []int
		buses   []string
		err     string
	}{
		{name: "UUIDs, as the NVIDIA plugin sets them by default", root: gpuRoot(t, 4, uuids, nil), visible: "GPU-cccc,GPU-aaaa", want: 2,
			minors: []int{0, 2}, others: []int{1, 3}, buses: []string{"0000:01:00.0", "0000:03:00.0"}},
		// NVML numbers GPUs by PCI address; the driver may give minors in another order.
		{name: "indexes map through the driver's PCI order", root: gpuRoot(t, 3, uuids, map[int]int{0: 2, 2: 0}), visible: "0", want: 1,
			minors: []int{2}, others: []int{0, 1}, buses: []string{"0000:01:00.0", "0000:02:00.0"}},
		{name: "stand-in GPUs: an index is the minor", root: gpuRoot(t, 3, nil, nil), visible: "1", want: 1, minors: []int{1}, others: []int{0, 2}},
		{name: "all", root: gpuRoot(t, 2, nil, nil), visible: "all", want: 2, minors: []int{0, 1}},
		{name: "the volume-mounts strategy", root: gpuRoot(t, 4, uuids, nil), volumes: []string{"GPU-dddd"}, want: 1, minors: []int{3}, others: []int{0, 1, 2},
			buses: []string{"0000:00:00.0", "0000:01:00.0", "0000:02:00.0"}},
		{name: "nothing said, and the node has exactly the pod's number", root: gpuRoot(t, 2, nil, nil), want: 2, minors: []int{0, 1}},
		{name: "nothing said on a node with more GPUs than the pod's", root: gpuRoot(t, 3, nil, nil), want: 1,
			err: "this pod asked for 1 GPUs and sees 3 GPU device files, and nothing says which"},
		{name: "fewer than asked", root: gpuRoot(t, 3, nil, nil), visible: "0", want: 2, err: "NVIDIA_VISIBLE_DEVICES=0 names 1 GPUs (/dev/nvidia0), this pod asked for 2"},
		{name: "an unknown UUID", root: gpuRoot(t, 2, uuids, nil), visible: "GPU-ffff", want: 1, err: "GPU GPU-ffff: the driver describes no GPU of that UUID"},
		{name: "a UUID without the driver's description", root: gpuRoot(t, 2, nil, nil), visible: "GPU-aaaa", want: 1, err: "cannot be mapped to a device file"},
		{name: "a MIG device", root: gpuRoot(t, 2, uuids, nil), visible: "MIG-1234", want: 1, err: "MIG-1234 is a MIG device"},
		{name: "an index past the node's GPUs", root: gpuRoot(t, 2, nil, nil), visible: "5", want: 1, err: "GPU index 5: no /dev/nvidia5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range c.volumes {
				must(t, os.MkdirAll(filepath.Join(c.root, DeviceListDir), 0o755))
				must(t, os.WriteFile(filepath.Join(c.root, DeviceListDir, v), nil, 0o644))
			}
			p, err := FindPodGPUs(c.root, c.visible, c.want)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Minors, c.minors) || !reflect.DeepEqual(p.Others(), c.others) || !reflect.DeepEqual(p.OtherBusIDs(), c.buses) {
				t.Fatalf("minors %v others %v buses %v; want %v %v %v", p.Minors, p.Others(), p.OtherBusIDs(), c.minors, c.others, c.buses)
			}
			if p.From == "" {
				t.Error("no source said")
			}
		})
	}
}

func TestGresConfListsThePodsOwnGPUs(t *testing.T) {
	p := PodGPUs{Minors: []int{1, 6}, Node: []int{0, 1, 2, 3, 4, 5, 6, 7}, From: "NVIDIA_VISIBLE_DEVICES=1,6"}
	got := GresConf(p, GresSpec{Type: "h100", Sockets: 2, CoresPerSocket: 56})
	want := "# Written by slurm-jail-exec: the GPUs the device plugin gave this pod (NVIDIA_VISIBLE_DEVICES=1,6).\n" +
		"Name=gpu Type=h100 File=/dev/nvidia1 Cores=0-55\n" +
		"Name=gpu Type=h100 File=/dev/nvidia6 Cores=56-111\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	// No topology, no type: the files alone.
	if got := GresConf(PodGPUs{Minors: []int{2}, Node: []int{0, 1, 2}}, GresSpec{}); !strings.HasSuffix(got, "\nName=gpu File=/dev/nvidia2\n") {
		t.Fatalf("got:\n%s", got)
	}
	// GPUs that do not split evenly over the sockets are bound to no cores.
	if got := GresConf(PodGPUs{Minors: []int{2}, Node: []int{0, 1, 2}}, GresSpec{Sockets: 2, CoresPerSocket: 4}); strings.Contains(got, "Cores=") {
		t.Fatalf("got:\n%s", got)
	}
}
