package jailexec

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// A worker pod is privileged, so its /dev holds every GPU of the node, not only those the
// device plugin gave it. Which ones it was given is said by the environment the plugin sets
// (NVIDIA_VISIBLE_DEVICES: the container toolkit's own instruction) or, where the plugin is set
// to "volume-mounts", by the names under /var/run/nvidia-container-devices. The entrypoint maps
// them to device files, shows the jail only those, and tells slurmd only those (GresConf).

// VisibleDevicesEnv is the variable the NVIDIA device plugin sets to the GPUs it allocated:
// UUIDs (GPU-…) by default, indexes with deviceIDStrategy=index, "all", "none" or "void".
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// DeviceListDir is where the NVIDIA device plugin's "volume-mounts" strategy names the allocated
// GPUs, one empty file per device ID.
const DeviceListDir = "/var/run/nvidia-container-devices"

// driverGPUsDir is where the driver describes each GPU (by PCI address): its UUID and the minor
// number of its device file.
const driverGPUsDir = "/proc/driver/nvidia/gpus"

var gpuDeviceName = regexp.MustCompile(`^nvidia([0-9]+)$`)

// DriverGPU is one GPU as the driver describes it.
type DriverGPU struct {
	BusID string
	UUID  string
	Minor int
}

// PodGPUs is what a pod was given of its node's GPUs.
type PodGPUs struct {
	// Minors are the device minor numbers (/dev/nvidiaN) of the pod's GPUs, sorted.
	Minors []int
	// Node are those of every GPU device file the container sees (the node's, in a privileged
	// pod), sorted.
	Node []int
	// Driver are the GPUs the driver describes (none for stand-in GPUs), by PCI address.
	Driver []DriverGPU
	// From says how the allocation was found, for the log.
	From string
}

// Others are the node's GPUs that are not the pod's.
func (p PodGPUs) Others() []int {
	mine := map[int]bool{}
	for _, m := range p.Minors {
		mine[m] = true
	}
	var out []int
	for _, m := range p.Node {
		if !mine[m] {
			out = append(out, m)
		}
	}
	return out
}

// OtherBusIDs are the PCI addresses of the driver's GPUs that are not the pod's.
func (p PodGPUs) OtherBusIDs() []string {
	mine := map[int]bool{}
	for _, m := range p.Minors {
		mine[m] = true
	}
	var out []string
	for _, g := range p.Driver {
		if !mine[g.Minor] {
			out = append(out, g.BusID)
		}
	}
	return out
}

// ReadDriverGPUs reads the driver's description of each GPU under root, sorted by PCI address
// (the order NVML and the device plugin number them in). No driver: none, and no error.
func ReadDriverGPUs(root string) ([]DriverGPU, error) {
	dir := filepath.Join(root, driverGPUsDir)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []DriverGPU
	for _, e := range entries {
		g := DriverGPU{BusID: e.Name(), Minor: -1}
		f, err := os.Open(filepath.Join(dir, e.Name(), "information"))
		if err != nil {
			return nil, err
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			k, v, ok := strings.Cut(s.Text(), ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "GPU UUID":
				g.UUID = v
			case "Device Minor":
				if n, err := strconv.Atoi(v); err == nil {
					g.Minor = n
				}
			}
		}
		f.Close()
		if err := s.Err(); err != nil {
			return nil, err
		}
		if g.Minor < 0 {
			return nil, fmt.Errorf("%s: no Device Minor", filepath.Join(dir, e.Name(), "information"))
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BusID < out[j].BusID })
	return out, nil
}

// NodeGPUMinors lists the minor numbers of the GPU device files (/dev/nvidiaN) under root.
func NodeGPUMinors(root string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(root, "dev"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if m := gpuDeviceName.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// FindPodGPUs finds which of the node's GPUs the pod was given, for a pod that asked for want
// whole GPUs. visible is NVIDIA_VISIBLE_DEVICES ("" when unset). It refuses what it cannot
// tell: a pod that may not know its GPUs must not offer the node's to jobs.
func FindPodGPUs(root, visible string, want int) (PodGPUs, error) {
	var p PodGPUs
	var err error
	if p.Node, err = NodeGPUMinors(root); err != nil {
		return p, err
	}
	if p.Driver, err = ReadDriverGPUs(root); err != nil {
		return p, err
	}
	ids, from := visibleIDs(root, visible)
	p.From = from
	switch {
	case ids == nil && len(p.Node) == want:
		// Nothing says which: a node with exactly the pod's number of GPUs (a container that is
		// not privileged sees only its own, too).
		p.Minors = append([]int(nil), p.Node...)
		p.From = fmt.Sprintf("every GPU device file of the node (%s unset, %d files)", VisibleDevicesEnv, len(p.Node))
		return p, nil
	case ids == nil:
		return p, fmt.Errorf("this pod asked for %d GPUs and sees %d GPU device files, and nothing says which the device plugin gave it "+
			"(%s is unset and %s has no entries): set the NVIDIA device plugin's device list strategy to envvar (its default) or volume-mounts",
			want, len(p.Node), VisibleDevicesEnv, DeviceListDir)
	case len(ids) == 1 && ids[0] == "all":
		p.Minors = append([]int(nil), p.Node...)
	default:
		for _, id := range ids {
			m, err := p.minorOf(id)
			if err != nil {
				return p, fmt.Errorf("%s: %w", from, err)
			}
			p.Minors = append(p.Minors, m)
		}
	}
	sort.Ints(p.Minors)
	p.Minors = dedupe(p.Minors)
	if len(p.Minors) != want {
		return p, fmt.Errorf("%s names %d GPUs (/dev/nvidia%s), this pod asked for %d", from, len(p.Minors), joinInts(p.Minors, ",/dev/nvidia"), want)
	}
	return p, nil
}

// visibleIDs reads the device plugin's list: the variable, else the volume-mounts folder. nil:
// neither says anything.
func visibleIDs(root, visible string) ([]string, string) {
	visible = strings.TrimSpace(visible)
	switch visible {
	case "":
	case "none", "void":
		return nil, ""
	default:
		return splitIDs(visible), VisibleDevicesEnv + "=" + visible
	}
	entries, err := os.ReadDir(filepath.Join(root, DeviceListDir))
	if err != nil || len(entries) == 0 {
		return nil, ""
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids, DeviceListDir + " (" + strings.Join(ids, ",") + ")"
}

func splitIDs(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// minorOf maps one device ID to the minor number of its device file: a UUID through the
// driver's description, an index as NVML numbers GPUs (by PCI address). Without the driver's
// description (stand-in GPUs), an index is the minor number itself.
func (p PodGPUs) minorOf(id string) (int, error) {
	if strings.HasPrefix(id, "MIG-") || strings.Contains(id, ":") {
		return 0, fmt.Errorf("%s is a MIG device: MIG instances are found through NVML (gresAutoDetect), not as device files", id)
	}
	if n, err := strconv.Atoi(id); err == nil {
		if len(p.Driver) > 0 {
			if n < 0 || n >= len(p.Driver) {
				return 0, fmt.Errorf("GPU index %d: the driver describes %d GPUs", n, len(p.Driver))
			}
			return p.Driver[n].Minor, nil
		}
		for _, m := range p.Node {
			if m == n {
				return n, nil
			}
		}
		return 0, fmt.Errorf("GPU index %d: no /dev/nvidia%d", n, n)
	}
	for _, g := range p.Driver {
		if strings.EqualFold(g.UUID, id) {
			return g.Minor, nil
		}
	}
	if len(p.Driver) == 0 {
		return 0, fmt.Errorf("GPU %s: the driver describes no GPU here (%s), so a UUID cannot be mapped to a device file", id, driverGPUsDir)
	}
	return 0, fmt.Errorf("GPU %s: the driver describes no GPU of that UUID", id)
}

func dedupe(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func joinInts(s []int, sep string) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, sep)
}

// GresSpec is what the generated config says of a worker's GPUs, for GresConf.
type GresSpec struct {
	// Type is the GPU type of gres.conf (h100), or empty.
	Type string
	// Sockets and CoresPerSocket are the host's CPU topology, when the spec gives it: each GPU
	// is then bound to the cores of its socket, the node's GPUs split evenly across sockets in
	// order (as on HGX and DGX hosts).
	Sockets, CoresPerSocket int
}

// GresConf is the node's own lines of gres.conf: one per GPU the pod was given.
func GresConf(p PodGPUs, s GresSpec) string {
	var b strings.Builder
	b.WriteString("# Written by slurm-jail-exec: the GPUs the device plugin gave this pod (" + p.From + ").\n")
	per := 0
	if s.Sockets > 0 && s.CoresPerSocket > 0 && len(p.Node) > 0 && len(p.Node)%s.Sockets == 0 {
		per = len(p.Node) / s.Sockets
	}
	for _, m := range p.Minors {
		parts := []string{"Name=gpu"}
		if s.Type != "" {
			parts = append(parts, "Type="+s.Type)
		}
		parts = append(parts, fmt.Sprintf("File=/dev/nvidia%d", m))
		if per > 0 {
			socket := sort.SearchInts(p.Node, m) / per
			parts = append(parts, fmt.Sprintf("Cores=%d-%d", socket*s.CoresPerSocket, (socket+1)*s.CoresPerSocket-1))
		}
		b.WriteString(strings.Join(parts, " ") + "\n")
	}
	return b.String()
}

// GPUFlags registers the entrypoint's flags for the pod's GPUs on fs, into cfg (the operator
// renders them: slurmconf.WorkerGPUFlags).
func GPUFlags(fs *flag.FlagSet, cfg *Config) {
	fs.IntVar(&cfg.GPUs, "gpus", 0, "the number of whole GPUs this pod asked for: the jail then shows only those the device plugin gave it ("+VisibleDevicesEnv+", else "+DeviceListDir+")")
	fs.StringVar(&cfg.GresConf, "gres-conf", "", "with --gpus: write this node's gres.conf lines for its GPUs here (the generated gres.conf includes "+slurmfacts.NodeGresConf+")")
	fs.StringVar(&cfg.Gres.Type, "gpu-type", "", "with --gres-conf: the GPUs' type in gres.conf")
	fs.Var(topologyFlag{&cfg.Gres}, "gpu-topology", "with --gres-conf: SOCKETS:CORES_PER_SOCKET of the host, to bind each GPU to its socket's cores")
}

// topologyFlag reads SOCKETS:CORES_PER_SOCKET.
type topologyFlag struct{ g *GresSpec }

func (f topologyFlag) String() string {
	if f.g == nil || f.g.Sockets == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", f.g.Sockets, f.g.CoresPerSocket)
}

func (f topologyFlag) Set(s string) error {
	var sockets, cores int
	if n, err := fmt.Sscanf(s, "%d:%d", &sockets, &cores); err != nil || n != 2 || sockets < 1 || cores < 1 {
		return fmt.Errorf("want SOCKETS:CORES_PER_SOCKET, both positive, got %q", s)
	}
	f.g.Sockets, f.g.CoresPerSocket = sockets, cores
	return nil
}
