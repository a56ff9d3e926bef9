package slurm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// An answer of 200 that does not say what the nodes are doing is an error, never "no nodes":
// read as an empty list it would let a scale-down or an update remove workers that run jobs.
// No real slurmrestd answers so for a configured cluster; a stand-in server gives the bodies.
func TestNodesRefusesAnAnswerWithoutNodes(t *testing.T) {
	for body, wantErr := range map[string]bool{
		`{}`:                                true,
		`{"nodes": null}`:                   true,
		`{"nodes": [{"state": ["IDLE"]}]}`:  true,
		`{"nodes": [{"name": ""}]}`:         true,
		`{"nodes": []}`:                     false,
		`{"nodes": [{"name": "worker-0"}]}`: false,
		`{"meta": {}, "nodes": [{"name": "worker-1", "state": ["IDLE"]}]}`: false,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(body))
		}))
		nodes, err := NewClient(srv.URL, []byte("0123456789abcdef0123456789abcdef")).Nodes(context.Background())
		srv.Close()
		if wantErr {
			if !errors.Is(err, ErrIncompleteAnswer) {
				t.Errorf("%s: got %v, %v; want ErrIncompleteAnswer", body, nodes, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestMissingNamesTheNodesAnAnswerLacks(t *testing.T) {
	got := Missing([]Node{{Name: "worker-0"}, {Name: "worker-2"}}, []string{"worker-0", "worker-1", "worker-2", "worker-3"})
	if len(got) != 2 || got[0] != "worker-1" || got[1] != "worker-3" {
		t.Fatalf("Missing = %v", got)
	}
}
