package base

import (
	"strings"
	"testing"
)

func TestSSSDConfigIsCheckedForWhatThePodsNeed(t *testing.T) {
	const good = "# the site's\n[sssd]\nservices = nss, pam, ssh\ndomains = directory\n\n[domain/directory]\nid_provider = ldap\nldap_uri = ldaps://ldap.example.org\n"
	if err := CheckSSSDConfig([]byte(good), true); err != nil {
		t.Errorf("a usable configuration: %v", err)
	}
	if err := CheckSSSDConfig([]byte(strings.Replace(good, ", ssh", "", 1)), false); err != nil {
		t.Errorf("without ssh, sshKeys off: %v", err)
	}
	for _, c := range []struct{ conf, want string }{
		{strings.Replace(good, ", ssh", "", 1), "lacks ssh"},
		{strings.Replace(good, "nss, ", "", 1), "lacks nss"},
		{strings.Replace(good, "pam, ", "", 1), "lacks pam"},
		{strings.Replace(good, "[sssd]", "[main]", 1), "no [sssd] section"},
		{strings.Replace(good, "domains = directory", "domains = corp", 1), `names "corp", which has no [domain/corp] section`},
		{strings.Replace(good, "domains = directory\n", "", 1), "names no domains"},
		{strings.Replace(good, "id_provider = ldap", "id_provider = ad", 1), `id_provider = "ad": the images carry SSSD's ldap provider only`},
		{strings.Replace(good, "ldap_uri = ", "ldap_uri ", 1), "line 8 is neither"},
		{"services = nss\n" + good, "line 1: option \"services\" before any [section]"},
	} {
		err := CheckSSSDConfig([]byte(c.conf), true)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v for:\n%s", c.want, err, c.conf)
		}
	}
}
