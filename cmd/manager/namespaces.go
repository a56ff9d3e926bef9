package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// parseNamespaces reads --watch-namespaces: namespace names separated by commas, or nothing
// (every namespace). A name that cannot be a namespace is an error at start, not a cache that
// silently watches nothing.
func parseNamespaces(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, ns := range strings.Split(s, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		out = append(out, ns)
	}
	return out, nil
}
