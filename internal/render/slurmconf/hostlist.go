package slurmconf

import "fmt"

// Range is the hostlist expression for prefix-0 … prefix-(n-1): "worker-[0-127]", or
// "worker-0" when n is 1, or "" when n is 0.
func Range(prefix string, n int32) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return fmt.Sprintf("%s-0", prefix)
	default:
		return fmt.Sprintf("%s-[0-%d]", prefix, n-1)
	}
}
