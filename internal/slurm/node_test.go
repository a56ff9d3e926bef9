package slurm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

func TestOnlyTheOperatorsDrainsAreOwned(t *testing.T) {
	for _, tc := range []struct {
		node Node
		want bool
	}{
		{Node{State: []string{"IDLE", "DRAIN"}, Reason: slurmfacts.DrainScaleDown}, true},
		{Node{State: []string{"IDLE", "DRAIN"}, Reason: "bad DIMM, ticket 4711"}, false},
		{Node{State: []string{"IDLE", "DRAIN"}, Reason: "slurm-operator"}, false},
		{Node{State: []string{"IDLE"}, Reason: slurmfacts.DrainReasonPrefix + "old reason kept by a REST resume"}, false},
	} {
		if got := tc.node.OwnedDrain(); got != tc.want {
			t.Errorf("%+v: OwnedDrain = %v, want %v", tc.node, got, tc.want)
		}
	}
}

func TestDrainedIsReadFromStateFlags(t *testing.T) {
	for _, tc := range []struct {
		node Node
		want bool
	}{
		{Node{State: []string{"IDLE", "DRAIN"}}, true},
		{Node{State: []string{"MIXED", "DRAIN"}, AllocCPUs: 1}, false},
		{Node{State: []string{"IDLE", "DRAIN", "COMPLETING"}}, false},
		{Node{State: []string{"IDLE", "DRAIN"}, AllocCPUs: 2}, false},
		{Node{State: []string{"IDLE"}}, false},
	} {
		if got := tc.node.Drained(); got != tc.want {
			t.Errorf("%v: Drained = %v, want %v", tc.node.State, got, tc.want)
		}
	}
}

func TestCountSortsNodes(t *testing.T) {
	c := Count([]Node{
		{State: []string{"IDLE"}}, {State: []string{"IDLE"}},
		{State: []string{"MIXED"}, AllocCPUs: 1}, {State: []string{"ALLOCATED"}},
		{State: []string{"IDLE", "DRAIN"}}, {State: []string{"MIXED", "DRAIN"}},
	})
	if c != (Counts{Idle: 2, Allocated: 2, Drained: 2}) {
		t.Fatalf("got %+v", c)
	}
}

func TestTokenIsAnHS256JWTOverTheRawKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	tok, err := Token(key, "slurm", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %s", tok)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if base64.RawURLEncoding.EncodeToString(mac.Sum(nil)) != parts[2] {
		t.Fatal("bad signature")
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	_ = json.Unmarshal(raw, &claims)
	if claims["sun"] != "slurm" || claims["exp"].(float64) != float64(now.Add(time.Hour).Unix()) {
		t.Fatalf("claims: %v", claims)
	}
}
