package slurm

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	for expr, want := range map[string][]string{
		"":                 nil,
		"worker-3":         {"worker-3"},
		"worker-[0-2,5]":   {"worker-0", "worker-1", "worker-2", "worker-5"},
		"a-1,b-[3-4]":      {"a-1", "b-3", "b-4"},
		"n[08-10]":         {"n08", "n09", "n10"},
		"gpu-h100-[1,3]x":  {"gpu-h100-1x", "gpu-h100-3x"},
		"worker-[2-1]":     {"worker-[2-1]"},
		"worker-[a-b],w-0": {"worker-[a-b]", "w-0"},
	} {
		if got := ExpandHostlist(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("ExpandHostlist(%q) = %q, want %q", expr, got, want)
		}
	}
}

func TestHostlistReadsAStringOrAList(t *testing.T) {
	var j struct {
		A Hostlist `json:"a"`
		B Hostlist `json:"b"`
		C Hostlist `json:"c"`
	}
	if err := json.Unmarshal([]byte(`{"a": "worker-[0-1]", "b": ["worker-4", "x-[1-2]"], "c": {"odd": 1}}`), &j); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j.A, Hostlist{"worker-0", "worker-1"}) || !reflect.DeepEqual(j.B, Hostlist{"worker-4", "x-1", "x-2"}) || j.C != nil {
		t.Errorf("got %q %q %q", j.A, j.B, j.C)
	}
}
