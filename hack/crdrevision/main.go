// Command crdrevision numbers the SlurmCluster CRD that controller-gen wrote: it adds the
// annotations slurm.hpc.dev/crd-revision (a number that grows by one whenever the generated CRD
// differs from the committed one) and slurm.hpc.dev/crd-digest (the SHA-256 of what
// controller-gen wrote), reading the previous pair from the CRD committed in the operator chart
// (make manifests passes HEAD's copy, so running it again during a change counts once). The manager updates a served CRD
// only to a higher revision (internal/crdupgrade), so an older manager never takes fields away.
//
//	go run ./hack/crdrevision GENERATED.yaml PREVIOUS.yaml
//
// GENERATED.yaml is rewritten in place; PREVIOUS.yaml may be missing (revision 1).
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/slurm-k8s/slurm-operator/internal/crdupgrade"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: crdrevision GENERATED.yaml PREVIOUS.yaml")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "crdrevision:", err)
		os.Exit(1)
	}
}

func run(generated, previous string) error {
	data, err := os.ReadFile(generated)
	if err != nil {
		return err
	}
	prevRev, prevDigest := 0, ""
	if old, err := os.ReadFile(previous); err == nil {
		if prevRev, prevDigest, err = annotations(old); err != nil {
			return fmt.Errorf("%s: %w", previous, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := number(data, prevRev, prevDigest)
	if err != nil {
		return fmt.Errorf("%s: %w", generated, err)
	}
	return os.WriteFile(generated, out, 0o644)
}

// number strips any revision annotations from a generated CRD, digests the rest, and writes the
// annotations back: the previous revision when the digest is the previous one, the next
// otherwise.
func number(data []byte, prevRev int, prevDigest string) ([]byte, error) {
	body := strip(data)
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:])
	rev := prevRev
	if digest != prevDigest {
		rev++
	}
	// controller-gen writes its own annotation first under metadata.annotations; ours follow it.
	anchor := []byte("\n  annotations:\n")
	i := bytes.Index(body, anchor)
	if i < 0 {
		return nil, errors.New("no metadata.annotations (controller-gen writes its version there)")
	}
	i += len(anchor)
	lines := fmt.Sprintf("    %s: %q\n    %s: %q\n", crdupgrade.DigestAnnotation, digest, crdupgrade.RevisionAnnotation, strconv.Itoa(rev))
	out := append([]byte{}, body[:i]...)
	out = append(out, lines...)
	return append(out, body[i:]...), nil
}

// strip removes the lines of the two annotations this command writes.
func strip(data []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if bytes.HasPrefix(t, []byte(crdupgrade.DigestAnnotation+":")) || bytes.HasPrefix(t, []byte(crdupgrade.RevisionAnnotation+":")) {
			continue
		}
		out = append(out, line...)
	}
	return out
}

// annotations reads the revision and digest a numbered CRD carries (0 and "" when it has none).
func annotations(data []byte) (int, string, error) {
	crd, err := crdupgrade.Parse(data)
	if err != nil {
		return 0, "", err
	}
	rev, err := crdupgrade.Revision(crd)
	return rev, crd.Annotations[crdupgrade.DigestAnnotation], err
}
