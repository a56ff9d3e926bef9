package slurmharness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// conf is the key=value lines of a Slurm config file (the last one wins, keys are
// case-insensitive). Node, partition and other multi-key lines are ignored: the harness only
// reads a few paths and ports, and never rewrites a file.
type conf map[string]string

func parseConf(data []byte) conf {
	c := conf{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if strings.ContainsAny(line, " \t") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			c[strings.ToLower(k)] = v
		}
	}
	return c
}

// withIncludes returns the file name of files with every "Include NAME" line replaced by the
// included file (names relative to the config folder, as Slurm reads them), so that settings
// of a layered slurm.conf are found. Includes of files not in files are left out.
func withIncludes(files map[string][]byte, name string, depth int) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(files[name]))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 2 && strings.EqualFold(f[0], "include") && depth < 8 {
			out.Write(withIncludes(files, path.Base(f[1]), depth+1))
			continue
		}
		out.WriteString(line + "\n")
	}
	return out.Bytes()
}

func (c conf) get(key, def string) string {
	if v, ok := c[strings.ToLower(key)]; ok && v != "" {
		return v
	}
	return def
}

// jwtKey is the jwt_key= path of AuthAltParameters, or "".
func (c conf) jwtKey() string {
	for _, p := range strings.Split(c.get("AuthAltParameters", ""), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(p), "jwt_key="); ok {
			return v
		}
	}
	return ""
}

// jwtKeyPaths lists where slurmctld and slurmdbd read the JWT key.
func jwtKeyPaths(slurmConf, slurmdbdConf []byte) []string {
	var paths []string
	add := func(p string) {
		if !path.IsAbs(p) {
			return
		}
		for _, q := range paths {
			if q == p {
				return
			}
		}
		paths = append(paths, p)
	}
	sc := parseConf(slurmConf)
	if p := sc.jwtKey(); p != "" {
		add(p)
	} else if strings.Contains(sc.get("AuthAltTypes", ""), "auth/jwt") {
		add(path.Join(sc.get("StateSaveLocation", "/var/spool/slurmctld"), "jwt_hs256.key"))
	}
	if slurmdbdConf != nil {
		add(parseConf(slurmdbdConf).jwtKey())
	}
	return paths
}

// lookupUser finds a user's uid and gid in a passwd file.
func lookupUser(passwd, name string) (int, int, error) {
	data, err := os.ReadFile(passwd)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 4 && f[0] == name {
			uid, err1 := strconv.Atoi(f[2])
			gid, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil {
				return 0, 0, fmt.Errorf("bad passwd line %q", line)
			}
			return uid, gid, nil
		}
	}
	return 0, 0, fmt.Errorf("no user %q in %s", name, passwd)
}
