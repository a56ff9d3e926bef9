package jailexec

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/slurm-k8s/slurm-operator/internal/slurmbundle"
)

// showSlurm shows the image's Slurm inside the jail (see internal/slurmbundle), and with extras
// the bundle's extra files (SSSD's client side): Slurm's own
// directories and files are bound read-only over the jail's paths, so a jail populated with its
// own Slurm packages runs the image's instead, and a jail without them gets them; missing
// command links are made; the libraries they need are shown under the pod's /run and linked
// from the jail's library directory only where the jail has none of that name. The shared jail
// gets nothing but mountpoints and links, which are the same on every node.
func showSlurm(jail, bundle string, m slurmbundle.Manifest, extras bool) (libs int, err error) {
	for _, e := range m.Entries {
		switch e.Kind {
		case slurmbundle.Extra:
			if !extras {
				continue
			}
			src := filepath.Join(bundle, slurmbundle.RootDir, e.Path)
			if err := bind(jail, Bind{Source: src, Target: e.Path, ReadOnly: true}); err != nil {
				return libs, err
			}
		case slurmbundle.Dir, slurmbundle.File:
			src := filepath.Join(bundle, slurmbundle.RootDir, e.Path)
			if err := bind(jail, Bind{Source: src, Target: e.Path, ReadOnly: true}); err != nil {
				return libs, err
			}
		case slurmbundle.Link:
			if err := linkIfMissing(jail, e.Path, e.Target); err != nil {
				return libs, err
			}
		}
	}
	libDir := filepath.Join(bundle, slurmbundle.LibDir)
	if _, err := os.Stat(libDir); err != nil {
		return libs, nil
	}
	if err := bind(jail, Bind{Source: libDir, Target: slurmbundle.RunLibDir, ReadOnly: true}); err != nil {
		return libs, err
	}
	for _, e := range m.Entries {
		if e.Kind != slurmbundle.Lib {
			continue
		}
		made, err := linkLibIfMissing(jail, e.Path, filepath.Join(slurmbundle.RunLibDir, e.Path))
		if err != nil {
			return libs, err
		}
		if made {
			libs++
		}
	}
	return libs, nil
}

// linkIfMissing makes the link p -> target in the jail unless something is at p already.
func linkIfMissing(jail, p, target string) error {
	dir, err := resolveInJail(jail, filepath.Dir(p))
	if err != nil {
		return err
	}
	at := filepath.Join(dir, filepath.Base(p))
	if _, err := os.Lstat(at); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(target, at); err != nil && !os.IsExist(err) {
		return fmt.Errorf("link %s: %w", p, err)
	}
	return nil
}

// linkLibIfMissing links a soname in the jail's library directory to target, unless the jail has
// a library of that name (its own, kept) or a link already (made by an earlier pod; every pod's
// points to the same place, where that pod's own copy is).
func linkLibIfMissing(jail, so, target string) (bool, error) {
	libDir, err := resolveInJail(jail, JailLibDir)
	if err != nil {
		return false, err
	}
	at := filepath.Join(libDir, so)
	if _, err := os.Lstat(at); err == nil {
		return false, nil
	}
	if err := os.Symlink(target, at); err != nil && !os.IsExist(err) {
		return false, fmt.Errorf("link %s: %w", so, err)
	}
	return true, nil
}

// setupSlurm shows cfg.SlurmBundle in the jail when the image carries one.
func setupSlurm(cfg Config, logf func(string, ...any)) error {
	if cfg.SlurmBundle == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(cfg.SlurmBundle, slurmbundle.ManifestFile)); os.IsNotExist(err) {
		logf("no Slurm in this image (%s): the jail's own Slurm runs", cfg.SlurmBundle)
		return nil
	}
	m, err := slurmbundle.Read(cfg.SlurmBundle)
	if err != nil {
		return fmt.Errorf("read the image's Slurm: %w", err)
	}
	libs, err := showSlurm(cfg.Jail, cfg.SlurmBundle, m, cfg.SSSDClient)
	if err != nil {
		return fmt.Errorf("show the image's Slurm %s in the jail: %w", m.Version, err)
	}
	logf("Slurm %s from the image: %d entries shown in the jail, %d libraries the jail lacked linked to %s",
		m.Version, len(m.Entries), libs, slurmbundle.RunLibDir)
	return nil
}
