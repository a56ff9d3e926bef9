package jailexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// setupGPUs finds the pod's GPUs and, where the node has others, shows the jail a /dev without
// them (and hides the driver's description of them, so NVML and nvidia-smi list the pod's
// alone); then it writes the node's gres.conf lines. It runs after /dev is bound.
func setupGPUs(cfg Config, logf func(string, ...any)) error {
	root := cfg.Root
	if root == "" {
		root = "/"
	}
	p, err := FindPodGPUs(root, cfg.VisibleDevices, cfg.GPUs)
	if err != nil {
		return fmt.Errorf("this pod's GPUs: %w", err)
	}
	logf("GPUs of this pod: /dev/nvidia%s, from %s", joinInts(p.Minors, ",/dev/nvidia"), p.From)
	if others := p.Others(); len(others) > 0 {
		if err := devWithout(cfg.Jail, root, others); err != nil {
			return fmt.Errorf("hide the node's other GPUs from the jail: %w", err)
		}
		for _, bus := range p.OtherBusIDs() {
			target, err := resolveInJail(cfg.Jail, filepath.Join(driverGPUsDir, bus))
			if err != nil {
				return err
			}
			if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=555"); err != nil {
				return fmt.Errorf("hide %s: %w", filepath.Join(driverGPUsDir, bus), err)
			}
		}
		logf("the node's other GPUs (/dev/nvidia%s) are not in the jail", joinInts(others, ",/dev/nvidia"))
	}
	if cfg.GresConf == "" {
		return nil
	}
	return writeGresConf(cfg.GresConf, GresConf(p, cfg.Gres))
}

// writeGresConf writes a node's gres.conf lines at path, whole or not at all.
func writeGresConf(path, lines string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(lines), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// devWithout replaces the jail's /dev (the container's, bound) with a tmpfs holding the same
// entries but the GPU device files of hide: device files made again with their numbers, owner
// and mode; folders (pts, shm, mqueue, by-id links) and other files bound; links copied. It is
// made in this mount namespace only: the node's /dev is never touched.
func devWithout(jail, root string, hide []int) error {
	skip := map[string]bool{}
	for _, m := range hide {
		skip["nvidia"+strconv.Itoa(m)] = true
	}
	src := filepath.Join(root, "dev")
	dst, err := resolveInJail(jail, "/dev")
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID, "mode=755,size=64k"); err != nil {
		return fmt.Errorf("mount a tmpfs on the jail's /dev: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if skip[name] {
			continue
		}
		from, to := filepath.Join(src, name), filepath.Join(dst, name)
		fi, err := os.Lstat(from)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // gone since it was listed
			}
			return err
		}
		switch mode := fi.Mode(); {
		case mode&os.ModeSymlink != 0:
			link, err := os.Readlink(from)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, to); err != nil {
				return err
			}
		case mode&os.ModeDevice != 0:
			if err := copyDevice(from, to); err != nil {
				return err
			}
		default:
			if err := ensureMountpoint(to, fi.IsDir()); err != nil {
				return err
			}
			if err := unix.Mount(from, to, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind /dev/%s: %w", name, err)
			}
		}
	}
	return nil
}

// copyDevice makes the device file again with its numbers, owner and mode; where making device
// files is refused, it binds the original instead.
func copyDevice(from, to string) error {
	var st unix.Stat_t
	if err := unix.Lstat(from, &st); err != nil {
		return err
	}
	err := unix.Mknod(to, st.Mode, int(st.Rdev))
	if err == nil {
		if err := unix.Chmod(to, st.Mode&0o7777); err != nil {
			return err
		}
		return unix.Lchown(to, int(st.Uid), int(st.Gid))
	}
	if !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("make %s: %w", to, err)
	}
	if err := ensureMountpoint(to, false); err != nil {
		return err
	}
	if err := unix.Mount(from, to, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", from, err)
	}
	return nil
}
