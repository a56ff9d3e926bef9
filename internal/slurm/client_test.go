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

// The streamed decoding keeps slurmrestd's rules: errors in a 200 answer make the request fail,
// fields are matched as encoding/json matches them, anything else is skipped, and a job list
// that is missing is an error, not an empty queue.
func TestAnswersAreDecodedAsTheyStream(t *testing.T) {
	serve := func(body string) *Client {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return NewClient(srv.URL, []byte("0123456789abcdef0123456789abcdef"))
	}
	ctx := context.Background()
	_, err := serve(`{"nodes": [{"name": "worker-0"}], "errors": [{"description": "Unable to query", "error_number": 1}]}`).Nodes(ctx)
	var apiErr *Error
	if !errors.As(err, &apiErr) || len(apiErr.Errors) != 1 {
		t.Errorf("a 200 answer with errors: %v", err)
	}
	nodes, err := serve(`{"meta": {"plugin": {"type": "openapi/slurmctld"}}, "warnings": [], "Nodes": [{"name": "worker-0", "state": ["IDLE"], "unknown": {"deep": [1, 2]}}]}`).Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Name != "worker-0" || !nodes[0].Has("IDLE") {
		t.Errorf("nodes after skipped fields, key matched without case: %+v, %v", nodes, err)
	}
	if _, err := serve(`{"jobs": null}`).Jobs(ctx); !errors.Is(err, ErrIncompleteAnswer) {
		t.Errorf("a null job list: %v", err)
	}
	if _, err := serve(`[]`).Jobs(ctx); err == nil {
		t.Error("an answer that is not an object was accepted")
	}
	if jobs, err := serve(`{"jobs": []}`).Jobs(ctx); err != nil || len(jobs) != 0 {
		t.Errorf("an empty queue: %v, %v", jobs, err)
	}
}
