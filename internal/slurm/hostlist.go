package slurm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ExpandHostlist turns Slurm's hostlist expression into names: "worker-[0-2,5]" is worker-0,
// worker-1, worker-2 and worker-5; "a-1,b-[3-4]" is a-1, b-3 and b-4. Zero-padded ranges keep
// their width ("n[08-10]": n08, n09, n10). One bracket group per name, as the operator's node
// names have; a name it cannot read is returned as it is.
func ExpandHostlist(expr string) []string {
	var out []string
	for _, item := range SplitOutside(expr, '[', ']') {
		item = strings.TrimSpace(item)
		open := strings.IndexByte(item, '[')
		end := strings.LastIndexByte(item, ']')
		if open < 0 || end < open {
			if item != "" {
				out = append(out, item)
			}
			continue
		}
		prefix, ranges, suffix := item[:open], item[open+1:end], item[end+1:]
		names, ok := expandRanges(prefix, ranges, suffix)
		if !ok {
			out = append(out, item)
			continue
		}
		out = append(out, names...)
	}
	return out
}

// SplitOutside splits s at the commas outside the pairs of open and close: "a-[1,2],b" with
// '[' and ']' is "a-[1,2]" and "b"; Slurm's TRES lists nest in parentheses the same way.
func SplitOutside(s string, open, close rune) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case open:
			depth++
		case close:
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func expandRanges(prefix, ranges, suffix string) ([]string, bool) {
	var out []string
	for _, part := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || b < a || b-a > 1<<16 {
			return nil, false
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for i := a; i <= b; i++ {
			out = append(out, fmt.Sprintf("%s%0*d%s", prefix, width, i, suffix))
		}
	}
	return out, true
}

// Hostlist is a job's node list as slurmrestd gives it: a hostlist expression, or a list of
// names (either way, Names expands it).
type Hostlist []string

// UnmarshalJSON reads a string expression or a list of strings.
func (h *Hostlist) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*h = ExpandHostlist(s)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*h = nil
		for _, l := range list {
			*h = append(*h, ExpandHostlist(l)...)
		}
		return nil
	}
	*h = nil // another shape: no names, rather than no job list at all
	return nil
}
