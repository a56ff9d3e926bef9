package slurmbundle

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// SourcePackage is the Debian source package Slurm's binary packages are built from.
const SourcePackage = "slurm-wlm"

// skipPrefixes are package paths a bundle leaves out: configuration (the operator's), state,
// documentation, service units (pods run no init), and what only builds need.
var skipPrefixes = []string{"/etc/", "/var/", "/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/",
	"/usr/lib/systemd/", "/lib/systemd/", "/usr/lib/sysusers.d/", "/usr/lib/tmpfiles.d/", "/usr/include/",
	"/usr/lib/x86_64-linux-gnu/pkgconfig/", "/usr/lib/aarch64-linux-gnu/pkgconfig/"}

// commandDirs are searched for links into the bundle that the packages did not list: the
// alternatives system's (/usr/sbin/slurmd -> /etc/alternatives/slurmd -> /usr/sbin/slurmd-wlm).
var commandDirs = []string{"/usr/bin", "/usr/sbin"}

// libDirs are where a library a bundled program needs is looked for, after its RUNPATH.
var libDirs = []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib"}

// glibc's libraries are the jail's own: a bundle never carries them (the jail's C library is the
// one its loader loads, and the images and the jail share Debian's release).
var glibc = map[string]bool{"libc.so.6": true, "libm.so.6": true, "libpthread.so.0": true, "libdl.so.2": true,
	"librt.so.1": true, "libresolv.so.2": true, "libutil.so.1": true, "libanl.so.1": true, "libmvec.so.1": true,
	"ld-linux-x86-64.so.2": true, "ld-linux-aarch64.so.1": true, "libthread_db.so.1": true,
	"libc_malloc_debug.so.0": true, "libBrokenLocale.so.1": true}

// driverLib says whether a library belongs to the GPU driver, which is not in the image at build
// time: the GPU plugins load it from the node's driver at run time.
func driverLib(soname string) bool {
	return strings.HasPrefix(soname, "libnvidia-") || strings.HasPrefix(soname, "libcuda.so")
}

// Make copies the Slurm packages installed under root into out and writes its manifest. Extra
// names more files of root (absolute paths) for the jail to see from the image, in the pods
// that ask for them: SSSD's client side (its NSS and PAM modules, sss_ssh_authorizedkeys),
// which resolves a site's users in the jail; the libraries they need are bundled with Slurm's.
func Make(root, out string, extra ...string) (Manifest, error) {
	var m Manifest
	pkgs, version, err := installedPackages(root, SourcePackage)
	if err != nil {
		return m, err
	}
	if len(pkgs) == 0 {
		return m, fmt.Errorf("no package built from %s is installed under %s", SourcePackage, root)
	}
	m.Version = version
	paths, err := packagePaths(root, pkgs)
	if err != nil {
		return m, err
	}
	b := &builder{root: root, out: out, have: map[string]bool{}, names: map[string]bool{}}
	if err := os.MkdirAll(filepath.Join(out, RootDir), 0o755); err != nil {
		return m, err
	}
	var dirs []string
	for _, p := range paths {
		if skipped(p) || under(p, dirs) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			continue // listed, then removed by the image's own clean-up
		}
		switch {
		case fi.IsDir():
			if strings.HasPrefix(filepath.Base(p), "slurm") {
				dirs = append(dirs, p)
				if err := b.copyTree(p); err != nil {
					return m, err
				}
				m.Entries = append(m.Entries, Entry{Kind: Dir, Path: p})
			}
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(filepath.Join(root, p))
			if err != nil {
				return m, err
			}
			m.Entries = append(m.Entries, Entry{Kind: Link, Path: p, Target: t})
			b.have[p] = true
		case fi.Mode().IsRegular():
			if err := b.copyFile(p, p); err != nil {
				return m, err
			}
			m.Entries = append(m.Entries, Entry{Kind: File, Path: p})
		}
	}
	for _, p := range extra {
		p = filepath.Clean("/" + p)
		if b.have[p] {
			continue
		}
		t, err := resolve(root, p)
		if err != nil {
			return m, fmt.Errorf("extra file %s: %w", p, err)
		}
		if fi, err := os.Stat(filepath.Join(root, t)); err != nil || !fi.Mode().IsRegular() {
			return m, fmt.Errorf("extra file %s is not a regular file under %s", p, root)
		}
		if err := b.copyFile(t, p); err != nil {
			return m, err
		}
		m.Entries = append(m.Entries, Entry{Kind: Extra, Path: p})
	}
	alt, err := b.alternatives()
	if err != nil {
		return m, err
	}
	m.Entries = append(m.Entries, alt...)
	libs, err := b.libraries()
	if err != nil {
		return m, err
	}
	m.Entries = append(m.Entries, libs...)
	if err := writeFile(filepath.Join(out, VersionFile), m.Version+"\n"); err != nil {
		return m, err
	}
	var sb strings.Builder
	if err := m.Write(&sb); err != nil {
		return m, err
	}
	return m, writeFile(filepath.Join(out, ManifestFile), sb.String())
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }

func skipped(p string) bool {
	for _, s := range skipPrefixes {
		if strings.HasPrefix(p+"/", s) {
			return true
		}
	}
	return false
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// UpstreamVersion turns a Debian version (1:24.11.5-4+deb13u1) into Slurm's (24.11.5).
func UpstreamVersion(v string) string {
	if i := strings.Index(v, ":"); i >= 0 {
		v = v[i+1:]
	}
	if i := strings.LastIndex(v, "-"); i >= 0 {
		v = v[:i]
	}
	return v
}

// installedPackages reads dpkg's status under root: the installed packages built from source,
// and the upstream version of slurmd (or of the first such package).
func installedPackages(root, source string) ([]string, string, error) {
	f, err := os.Open(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	var pkgs []string
	var version string
	para := map[string]string{}
	flush := func() {
		src := strings.Fields(para["Source"] + " ")
		if para["Status"] == "install ok installed" && len(src) > 0 && src[0] == source {
			pkgs = append(pkgs, para["Package"])
			if version == "" || para["Package"] == "slurmd" {
				version = UpstreamVersion(para["Version"])
			}
		}
		para = map[string]string{}
	}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for s.Scan() {
		line := s.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, " "):
		default:
			if k, v, ok := strings.Cut(line, ":"); ok {
				para[k] = strings.TrimSpace(v)
			}
		}
	}
	flush()
	sort.Strings(pkgs)
	return pkgs, version, s.Err()
}

// packagePaths reads the packages' file lists, sorted so that a directory precedes its contents.
func packagePaths(root string, pkgs []string) ([]string, error) {
	seen := map[string]bool{}
	var paths []string
	for _, p := range pkgs {
		var data []byte
		var err error
		for _, name := range []string{p + ".list", p + ":amd64.list", p + ":arm64.list"} {
			if data, err = os.ReadFile(filepath.Join(root, "var/lib/dpkg/info", name)); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("the file list of %s: %w", p, err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = filepath.Clean("/" + strings.TrimSpace(line))
			if line == "/" || seen[line] {
				continue
			}
			seen[line] = true
			paths = append(paths, line)
		}
	}
	sort.Strings(paths)
	return paths, nil
}

type builder struct {
	root, out string
	// have holds the jail paths the bundle provides (files and links).
	have map[string]bool
	// names holds the base names of the bundle's files, for sonames it provides itself.
	names map[string]bool
	elves []string
}

func (b *builder) copyTree(dir string) error {
	return filepath.Walk(filepath.Join(b.root, dir), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, b.root)
		rel = filepath.Clean("/" + rel)
		dst := filepath.Join(b.out, RootDir, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(dst, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			b.names[filepath.Base(rel)] = true
			return os.Symlink(t, dst)
		case fi.Mode().IsRegular():
			return b.copyFile(rel, rel)
		}
		return nil
	})
}

// copyFile copies the root's file at src to the bundle's root at dst and notes it.
func (b *builder) copyFile(src, dst string) error {
	to := filepath.Join(b.out, RootDir, dst)
	if err := copyRegular(filepath.Join(b.root, src), to); err != nil {
		return err
	}
	b.have[dst] = true
	b.names[filepath.Base(dst)] = true
	if isELF(to) {
		b.elves = append(b.elves, to)
	}
	return nil
}

func copyRegular(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, fi.Mode().Perm())
}

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == elf.ELFMAG
}

// alternatives finds links in the command directories, not listed by any Slurm package, that
// resolve to one of the bundle's files, and records each as a link straight to that file.
func (b *builder) alternatives() ([]Entry, error) {
	var out []Entry
	for _, dir := range commandDirs {
		entries, err := os.ReadDir(filepath.Join(b.root, dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if b.have[p] || e.Type()&os.ModeSymlink == 0 {
				continue
			}
			t, err := resolve(b.root, p)
			if err != nil || !b.have[t] {
				continue
			}
			out = append(out, Entry{Kind: Link, Path: p, Target: t})
		}
	}
	return out, nil
}

// resolve follows the links of a path inside root as a process chrooted there would.
func resolve(root, p string) (string, error) {
	parts := strings.Split(strings.Trim(filepath.Clean(p), "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many links", p)
		}
		t, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(t) {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(t, "/"), "/"), parts...)
	}
	return cur, nil
}

// libraries copies, by soname, every library the bundle's programs and plugins need (and what
// those need) that is neither glibc's nor the bundle's own, and lists them.
func (b *builder) libraries() ([]Entry, error) {
	var entries []Entry
	done := map[string]bool{}
	var missing []string
	queue := append([]string(nil), b.elves...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		needed, runpath, err := elfNeeds(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, so := range needed {
			if done[so] || glibc[so] || b.names[so] {
				continue
			}
			done[so] = true
			src := b.findLib(so, runpath)
			if src == "" {
				if !driverLib(so) {
					missing = append(missing, fmt.Sprintf("%s (needed by %s)", so, filepath.Base(p)))
				}
				continue
			}
			dst := filepath.Join(b.out, LibDir, so)
			if err := copyRegular(filepath.Join(b.root, src), dst); err != nil {
				return nil, err
			}
			entries = append(entries, Entry{Kind: Lib, Path: so})
			queue = append(queue, dst)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("libraries not found under %s: %s", b.root, strings.Join(missing, ", "))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	return entries, nil
}

// findLib returns the resolved path, in root, of a soname.
func (b *builder) findLib(so string, runpath []string) string {
	for _, dir := range append(runpath, libDirs...) {
		p, err := resolve(b.root, filepath.Join(dir, so))
		if err != nil {
			continue
		}
		if fi, err := os.Stat(filepath.Join(b.root, p)); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

func elfNeeds(p string) (needed, runpath []string, err error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	needed, err = f.DynString(elf.DT_NEEDED)
	if err != nil {
		return nil, nil, nil // static: needs nothing
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				if d != "" && !strings.Contains(d, "$") {
					runpath = append(runpath, d)
				}
			}
		}
	}
	return needed, runpath, nil
}
