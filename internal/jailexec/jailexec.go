// Package jailexec runs a command chrooted in the jail, with what belongs to this pod bound into
// it: the kernel file systems, /dev (with the pod's /dev/shm and any GPU device files), /run
// (with the munge socket), /tmp, the pod's resolv.conf, hosts and hostname, the node-local
// config, spool and keys, the jail sub-mounts, the image's Slurm (daemons, commands, libraries
// and plugins, over whatever Slurm the jail has), and the NVIDIA driver files that the container
// toolkit put into the container. Every mount is made in the container's own mount namespace:
// the shared jail volume is never written except for missing mountpoints and links (the driver's,
// Slurm's), which are the same on every node.
package jailexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Bind is one bind mount into the jail: Source in the container, Target inside the jail.
type Bind struct {
	Source   string
	Target   string
	ReadOnly bool
}

// ParseBind reads SRC:DST or SRC:DST:ro.
func ParseBind(s string) (Bind, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Bind{}, fmt.Errorf("bind %q: want SRC:DST or SRC:DST:ro", s)
	}
	b := Bind{Source: parts[0], Target: parts[1]}
	if len(parts) == 3 {
		if parts[2] != "ro" {
			return Bind{}, fmt.Errorf("bind %q: the only option is ro", s)
		}
		b.ReadOnly = true
	}
	if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) {
		return Bind{}, fmt.Errorf("bind %q: both paths must be absolute", s)
	}
	if filepath.Clean(b.Target) == "/" {
		return Bind{}, fmt.Errorf("bind %q: cannot bind over the jail's root", s)
	}
	return b, nil
}

// Config is what the entrypoint does.
type Config struct {
	// Jail is where the jail volume is mounted in the container.
	Jail string
	// Root is the container's root as seen by this process ("/" except in tests).
	Root string
	// Binds are the pod's own files and directories to bind into the jail, after the defaults.
	Binds []Bind
	// DriverRoot is where the NVIDIA driver files found in the container are gathered, under
	// /run so that the jail sees them through its /run (RunDriverDir inside the jail).
	DriverRoot string
	// SlurmBundle is the image's Slurm (internal/slurmbundle), shown in the jail over the jail's
	// own. Empty, or a directory without a manifest: the jail's own Slurm, if any, runs.
	SlurmBundle string
	// SSSDClient shows the bundle's extra files too: SSSD's client side, for a cluster whose
	// users come from a directory (spec.identity).
	SSSDClient bool
	// GPUs is the number of whole GPUs the pod asked for; with more than zero, the entrypoint
	// finds which the device plugin gave it (VisibleDevices, else DeviceListDir) and shows the
	// jail only those (FindPodGPUs). Zero: /dev is the container's, whole.
	GPUs int
	// VisibleDevices is NVIDIA_VISIBLE_DEVICES as the device plugin set it.
	VisibleDevices string
	// GresConf, when set with GPUs, is where the node's gres.conf lines for those GPUs are
	// written (slurmfacts.NodeGresConf in a pod); Gres says their type and cores.
	GresConf string
	Gres     GresSpec
}

// RunDriverDir is where the driver files appear inside the jail (through its /run).
const RunDriverDir = "/run/slurm-operator/nvidia"

// DefaultBinds are bound into every jail, in this order. /dev comes with everything mounted
// under it (/dev/shm, /dev/pts, GPU device files); /run with the munge socket.
func DefaultBinds() []Bind {
	return []Bind{
		{Source: "/sys", Target: "/sys"},
		{Source: "/dev", Target: "/dev"},
		{Source: "/run", Target: "/run"},
		{Source: "/tmp", Target: "/tmp"},
		{Source: "/etc/resolv.conf", Target: "/etc/resolv.conf", ReadOnly: true},
		{Source: "/etc/hosts", Target: "/etc/hosts", ReadOnly: true},
		{Source: "/etc/hostname", Target: "/etc/hostname", ReadOnly: true},
	}
}

// CheckPopulated says whether the jail holds a populated root file system.
func CheckPopulated(jail string) error {
	if _, err := os.Stat(filepath.Join(jail, slurmfacts.JailMarkerFile)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the jail at %s is not populated yet (no %s)", jail, slurmfacts.JailMarkerFile)
		}
		return err
	}
	return nil
}

// inJail joins a jail path to the jail root, refusing paths that climb out of it through "..".
// Symlinks in the jail are the jail's own business: targets are resolved inside the jail by
// resolveInJail before anything is mounted on them.
func inJail(jail, p string) string {
	return filepath.Join(jail, filepath.Clean("/"+p))
}

// resolveInJail follows symlinks of a path inside the jail as the chrooted process would see
// them, so that a link in the jail (for example /etc/resolv.conf -> ../run/...) can never make
// a mount land outside the jail.
func resolveInJail(jail, p string) (string, error) {
	clean := filepath.Clean("/" + p)
	parts := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		name := parts[0]
		parts = parts[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(inJail(jail, next))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next // missing or not a link: kept as it is (it will be created)
			continue
		}
		hops++
		if hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links in the jail", p)
		}
		link, err := os.Readlink(inJail(jail, next))
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(link) {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(link, "/"), "/"), parts...)
	}
	return inJail(jail, cur), nil
}
