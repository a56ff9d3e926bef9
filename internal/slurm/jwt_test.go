package slurm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestVerifyTokenReadsBackWhatTokenSigned(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	tok, err := Token(key, "slurm-metrics", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := VerifyToken(key, tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "slurm-metrics" || !c.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("claims %+v, want slurm-metrics expiring at %v", c, now.Add(time.Hour))
	}
	if _, err := VerifyToken([]byte("another key of the same length.."), tok); err == nil {
		t.Fatal("a token signed with another key was accepted")
	}
	if _, err := VerifyToken(key, tok[:len(tok)-2]+"AA"); err == nil {
		t.Fatal("a token with a changed signature was accepted")
	}
	if _, err := VerifyToken(key, "a.b"); err == nil {
		t.Fatal("a token of two parts was accepted")
	}
}

// A client handed its tokens sends each request with the token it is handed at that moment,
// so a renewed token is used from the next request on.
func TestClientSendsTheTokenItIsHanded(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-SLURM-USER-TOKEN")+" "+r.Header.Get("X-SLURM-USER-NAME"))
		_, _ = w.Write([]byte(`{"pings":[]}`))
	}))
	defer srv.Close()
	c := NewClient(srv.URL, nil)
	c.User = "slurm-metrics"
	tokens := []string{"first", "second"}
	c.Tokens = func() (string, error) {
		tok := tokens[0]
		tokens = tokens[1:]
		return tok, nil
	}
	for range 2 {
		if _, err := c.Pings(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != "first slurm-metrics" || got[1] != "second slurm-metrics" {
		t.Fatalf("requests carried %q, want the first then the second token, for slurm-metrics", got)
	}
}
