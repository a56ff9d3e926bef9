// Package slurmbundle is how a pod's Slurm travels in its image instead of in the jail. At image
// build time Make copies the files of the installed Slurm packages (daemons, client commands,
// libslurm, plugins) and the libraries they need into a bundle directory with a manifest; at pod
// start the jail entrypoint shows each of them inside the jail at its standard path (see
// internal/jailexec). So replacing a pod's image replaces its Slurm, and the jail stays the
// users'.
package slurmbundle

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDir is where the worker and login images carry the bundle.
const DefaultDir = "/opt/slurm-operator/slurm"

// RunLibDir is where, inside the jail (through the pod's own /run), the bundle's libraries are
// shown; the jail's library directory links there for the libraries it lacks.
const RunLibDir = "/run/slurm-operator/slurm/lib"

// Files of a bundle directory.
const (
	// ManifestFile lists the entries, one per line.
	ManifestFile = "manifest"
	// VersionFile holds the bundled Slurm's upstream version (24.11.5).
	VersionFile = "version"
	// RootDir holds Slurm's files at their paths (root/usr/sbin/slurmd-wlm).
	RootDir = "root"
	// LibDir holds the libraries Slurm needs that are not glibc's, by soname.
	LibDir = "lib"
)

// Kind says how an entry is shown in the jail.
type Kind string

const (
	// Dir is a directory that belongs to Slurm alone (its plugin directory): bound whole over the
	// jail's, so no plugin of another version is ever loaded next to these.
	Dir Kind = "dir"
	// File is bound over the jail's file of that path, or on an empty file made there.
	File Kind = "file"
	// Link is made in the jail only where the path is missing (the jail's own link of that name
	// resolves to a bound file already).
	Link Kind = "link"
	// Extra is a file that is not Slurm's (SSSD's client side), bound like File but only in pods
	// that ask for it (a cluster with spec.identity): other jails keep their own copy, and
	// their package manager may replace it.
	Extra Kind = "extra"
	// Lib is a library by soname: the jail's library directory links to RunLibDir for it only
	// where the jail has no library of that name, so what users installed is kept.
	Lib Kind = "lib"
)

// Entry is one line of the manifest.
type Entry struct {
	Kind Kind
	// Path is the absolute path in the jail; for Lib, the soname.
	Path string
	// Target is where a Link points.
	Target string
}

// Manifest is what a bundle holds.
type Manifest struct {
	// Version is Slurm's upstream version (24.11.5).
	Version string
	Entries []Entry
}

// Write writes the manifest's lines: "KIND PATH [TARGET]".
func (m Manifest) Write(w io.Writer) error {
	for _, e := range m.Entries {
		line := string(e.Kind) + " " + e.Path
		if e.Kind == Link {
			line += " " + e.Target
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// Read reads a bundle directory's manifest and version.
func Read(dir string) (Manifest, error) {
	var m Manifest
	v, err := os.ReadFile(filepath.Join(dir, VersionFile))
	if err != nil {
		return m, err
	}
	m.Version = strings.TrimSpace(string(v))
	f, err := os.Open(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 {
			continue
		}
		e, err := parseEntry(fields)
		if err != nil {
			return m, fmt.Errorf("%s line %d: %w", filepath.Join(dir, ManifestFile), n, err)
		}
		m.Entries = append(m.Entries, e)
	}
	return m, s.Err()
}

func parseEntry(fields []string) (Entry, error) {
	e := Entry{Kind: Kind(fields[0])}
	want := 2
	if e.Kind == Link {
		want = 3
	}
	if len(fields) != want {
		return e, fmt.Errorf("%q: want %d fields", strings.Join(fields, " "), want)
	}
	e.Path = fields[1]
	switch e.Kind {
	case Dir, File, Link, Extra:
		if !filepath.IsAbs(e.Path) || filepath.Clean(e.Path) != e.Path || e.Path == "/" {
			return e, fmt.Errorf("%q is not a clean absolute path", e.Path)
		}
	case Lib:
		if strings.Contains(e.Path, "/") {
			return e, fmt.Errorf("%q is not a soname", e.Path)
		}
	default:
		return e, fmt.Errorf("unknown kind %q", fields[0])
	}
	if e.Kind == Link {
		e.Target = fields[2]
	}
	return e, nil
}
