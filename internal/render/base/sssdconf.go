package base

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// sssdProviders are the id providers the images carry (Debian's sssd-ldap).
var sssdProviders = []string{"ldap"}

// CheckSSSDConfig checks the admin's sssd.conf for what the pods need of it, so that a mistake is
// reported in the status before any pod rolls, rather than as a sidecar that never starts (and
// a controller pod that never comes back): lines SSSD can read, an [sssd] section whose services
// include nss and pam (the login nodes' PAM asks pam_sss) and, with sshKeys, ssh, and domains
// that each have a [domain/NAME] section with an id provider the images carry. SSSD checks the
// rest when it starts.
func CheckSSSDConfig(conf []byte, sshKeys bool) error {
	sections := map[string]map[string]string{}
	var cur map[string]string
	s := bufio.NewScanner(bytes.NewReader(conf))
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			name := strings.TrimSpace(line[1 : len(line)-1])
			if sections[name] == nil {
				sections[name] = map[string]string{}
			}
			cur = sections[name]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return fmt.Errorf("line %d is neither a [section], an option = value nor a comment: %q", n, line)
			}
			if cur == nil {
				return fmt.Errorf("line %d: option %q before any [section]", n, strings.TrimSpace(k))
			}
			cur[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	main := sections["sssd"]
	if main == nil {
		return fmt.Errorf("no [sssd] section")
	}
	services := list(main["services"])
	want := []string{"nss", "pam"}
	if sshKeys {
		want = append(want, "ssh")
	}
	for _, w := range want {
		if !slices.Contains(services, w) {
			return fmt.Errorf("[sssd] services = %q lacks %s (the pods need %s)", main["services"], w, strings.Join(want, ", "))
		}
	}
	domains := list(main["domains"])
	if len(domains) == 0 {
		return fmt.Errorf("[sssd] names no domains")
	}
	for _, d := range domains {
		sec := sections["domain/"+d]
		if sec == nil {
			return fmt.Errorf("[sssd] domains names %q, which has no [domain/%s] section", d, d)
		}
		if p := sec["id_provider"]; !slices.Contains(sssdProviders, p) {
			return fmt.Errorf("[domain/%s] id_provider = %q: the images carry SSSD's %s provider only", d, p, strings.Join(sssdProviders, ", "))
		}
	}
	return nil
}

// list splits an SSSD list option ("nss, pam, ssh").
func list(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
