package jailexec

import (
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The NVIDIA container toolkit (legacy hook or CDI) puts the driver's user-space files into the
// container's own root: libraries next to the system's, tools in /usr/bin. Jobs run in the jail,
// so the entrypoint gathers what is there and shows it to the jail. Nothing here assumes a GPU:
// on a node without one nothing is found and nothing is done.

// driverLibDirs are where the toolkit puts libraries, in the order they are searched.
// The last two are where GKE's driver installer mounts the node's driver into GPU containers.
var driverLibDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib",
	"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"}

// driverToolDirs are where the toolkit (or GKE's installer) puts the driver's programs.
var driverToolDirs = []string{"/usr/bin", "/usr/local/nvidia/bin"}

// driverLibPrefixes name the driver's libraries (libcuda, NVML, the JIT compiler, video codecs,
// OptiX, the debugger). The CUDA toolkit's own libraries (libcudart, libcublas) belong to the
// user's software, not to the driver, and are left alone.
var driverLibPrefixes = []string{"libcuda.so", "libcudadebugger.so", "libnvidia-", "libnvcuvid.so", "libnvoptix.so"}

// DriverTools are the driver's programs; the jail image links each from /usr/bin to
// RunDriverDir/bin, so they resolve on GPU nodes and are missing elsewhere.
var DriverTools = []string{"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}

// DriverFile is one file of the driver found in the container.
type DriverFile struct {
	// Path is where it is in the container.
	Path string
	// Name is its name in RunDriverDir/lib or RunDriverDir/bin.
	Name string
	// Tool is true for programs, false for libraries.
	Tool bool
	// LinkTarget is set for a symbolic link (libcuda.so.1 -> libcuda.so.550.54.15): the link is
	// made again beside the files instead of being bound.
	LinkTarget string
}

// Driver is what was found, and the names the jail's library directory should link to.
type Driver struct {
	Files []DriverFile
	// Sonames are the names programs load the libraries by (libcuda.so.1), read from the ELF
	// files, plus the links found beside them.
	Sonames []string
}

// FindDriver looks for the driver's files under root (the container's root, "/" in a pod).
func FindDriver(root string) (Driver, error) {
	var d Driver
	seen := map[string]bool{}
	sonames := map[string]bool{}
	for _, dir := range driverLibDirs {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if seen[name] || !isDriverLib(name) {
				continue
			}
			p := filepath.Join(root, dir, name)
			fi, err := os.Lstat(p)
			if err != nil {
				continue
			}
			f := DriverFile{Path: filepath.Join(dir, name), Name: name}
			switch {
			case fi.Mode()&os.ModeSymlink != 0:
				t, err := os.Readlink(p)
				if err != nil {
					continue
				}
				// A link to a file beside it is made again; any other link is bound as the
				// file it names.
				if !strings.Contains(t, "/") {
					f.LinkTarget = t
				}
				sonames[name] = true
			case fi.Mode().IsRegular():
				if so := soname(p); so != "" {
					sonames[so] = true
				}
			default:
				continue
			}
			seen[name] = true
			d.Files = append(d.Files, f)
		}
	}
	for _, t := range DriverTools {
		if dir := toolDir(root, t); dir != "" {
			d.Files = append(d.Files, DriverFile{Path: filepath.Join(dir, t), Name: t, Tool: true})
		}
	}
	for s := range sonames {
		d.Sonames = append(d.Sonames, s)
	}
	sort.Strings(d.Sonames)
	return d, nil
}

// toolDir is the directory of driverToolDirs that holds the driver's program name: the first
// that holds it as an ELF program, else the first that holds it at all. A wrapper script (some
// images put one in /usr/bin that runs the real program by its container path) would not run
// in the jail, where that path does not exist.
func toolDir(root, name string) string {
	first := ""
	for _, dir := range driverToolDirs {
		p := filepath.Join(root, dir, name)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if isELF(p) {
			return dir
		}
		if first == "" {
			first = dir
		}
	}
	return first
}

func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "\x7fELF"
}

func isDriverLib(name string) bool {
	if !strings.Contains(name, ".so") {
		return false
	}
	for _, p := range driverLibPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// soname reads DT_SONAME from a shared library, or "" when it has none or is not ELF.
func soname(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return ""
	}
	return names[0]
}

// sonameTargets maps each soname that has no file or link of its own name to the library
// that carries it, so that the link can be made.
func (d Driver) sonameTargets(root string) map[string]string {
	have := map[string]bool{}
	for _, f := range d.Files {
		have[f.Name] = true
	}
	out := map[string]string{}
	for _, f := range d.Files {
		if f.Tool || f.LinkTarget != "" {
			continue
		}
		so := soname(filepath.Join(root, f.Path))
		if so != "" && !have[so] {
			out[so] = f.Name
		}
	}
	return out
}
