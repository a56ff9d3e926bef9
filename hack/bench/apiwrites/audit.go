package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// auditPolicy logs every request at the Metadata level, once, when its response is complete.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
# The status patches' bodies, to tell why a status was written (-why).
- level: Request
  resources: [{group: slurm.hpc.dev, resources: ["slurmclusters/status"]}]
- level: Metadata
`

// auditEvent is what the counter reads of one audit log line.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time       `json:"requestReceivedTimestamp"`
	Object   json.RawMessage `json:"requestObject"`
}

// what names a request's kind: verb and resource (with its subresource), or the path of a
// request for no resource (discovery).
func (e auditEvent) what() string {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		path := e.RequestURI
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		return e.Verb + " " + path
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return e.Verb + " " + r
}

func (e auditEvent) write() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection", "apply":
		return true
	}
	return false
}

func (e auditEvent) failed() bool { return e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 }

// window counts one user's requests received in [from, to).
type window struct {
	requests, writes, failed int
	watches                  int
	byKind                   map[string]int
	// statusPatches are the bodies of the status patches, in order.
	statusPatches []string
	// written names each write, in order.
	written []string
}

// count reads the audit log and counts user's requests received in [from, to). Watches are
// counted apart: a watch is one long request, not traffic.
func count(logPath, user string, from, to time.Time) (window, error) {
	w := window{byKind: map[string]int{}}
	f, err := os.Open(logPath)
	if err != nil {
		return w, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var e auditEvent
			if json.Unmarshal(line, &e) == nil && e.User.Username == user &&
				!e.Received.Before(from) && e.Received.Before(to) {
				// A watch is counted when it starts (it completes only when it ends), every other
				// request when it completes.
				switch {
				case e.Verb == "watch" && e.Stage == "ResponseStarted":
					w.watches++
				case e.Verb != "watch" && e.Stage == "ResponseComplete":
					w.requests++
					w.byKind[e.what()]++
					if e.write() {
						w.writes++
						if e.ObjectRef != nil {
							w.written = append(w.written, e.Received.Format("15:04:05.000")+" "+e.what()+" "+e.ObjectRef.Name)
						}
					}
					if e.ObjectRef != nil && e.ObjectRef.Resource == "slurmclusters" && e.ObjectRef.Subresource == "status" && len(e.Object) > 0 {
						w.statusPatches = append(w.statusPatches, e.Received.Format("15:04:05.000")+" "+string(e.Object))
					}
					if e.failed() {
						// A read of something that does not exist (a key Secret before it is
						// made) is an answer, not a failure.
						if code := e.ResponseStatus.Code; e.write() || code != 404 {
							w.failed++
							w.byKind[fmt.Sprintf("FAILED (%d) %s", code, e.what())]++
						} else {
							w.byKind["404 "+e.what()]++
						}
					}
				}
			}
		}
		if err == io.EOF {
			return w, nil
		}
		if err != nil {
			return w, err
		}
	}
}

func (w window) String() string {
	keys := make([]string, 0, len(w.byKind))
	for k := range w.byKind {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "requests=%d writes=%d failed=%d watches=%d\n", w.requests, w.writes, w.failed, w.watches)
	for _, k := range keys {
		fmt.Fprintf(&b, "    %5d  %s\n", w.byKind[k], k)
	}
	return b.String()
}
