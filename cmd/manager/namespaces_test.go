package main

import (
	"reflect"
	"testing"
)

func TestParseNamespaces(t *testing.T) {
	if got, err := parseNamespaces(""); got != nil || err != nil {
		t.Errorf(`"": %v, %v; want every namespace`, got, err)
	}
	if got, err := parseNamespaces(" slurm-a, slurm-b "); err != nil || !reflect.DeepEqual(got, []string{"slurm-a", "slurm-b"}) {
		t.Errorf("two names: %v, %v", got, err)
	}
	for _, bad := range []string{"Slurm", "a,,b", "team.a", "a,"} {
		if _, err := parseNamespaces(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
