package node

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestImagesPushedToARegistry pushes every image with `hack/images-push.sh` (make images-push)
// to a real registry server run here (go-containerregistry's, the one `crane registry serve`
// runs, storing blobs on disk), reads each back as a client pulling it would, and installs the
// charts' templates with the values files the push wrote.
//
// PUSH_PLATFORMS picks the platforms of the Slurm images and the jail: linux/amd64 (the default,
// what make test pushes: their arm64 build runs Debian's package scripts under an emulator, too
// slow for the suite's budget on a cold cache) or linux/amd64,linux/arm64 (make test-arm64, what
// make images-push pushes). The operator's and the exporter's images are for both always.
func TestImagesPushedToARegistry(t *testing.T) {
	out := t.TempDir()
	platforms := os.Getenv("PUSH_PLATFORMS")
	if platforms == "" {
		platforms = "linux/amd64"
	}
	arm64 := platforms != "linux/amd64"
	e := newEnv(t, []string{"OUT=" + out, "PLATFORMS=" + platforms})
	crane := strings.TrimSpace(lastLine(e.sh("", "hack/crane.sh")))
	registry := startRegistry(t, crane, filepath.Join(out, "registry"))
	// ask runs crane as a client and returns what it printed on stdout.
	ask := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		got, err := exec.CommandContext(ctx, crane, args...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("crane %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return string(got)
	}

	const tag = "24.11-test.1"
	start := time.Now()
	e.sh("", "hack/images-push.sh", registry+"/hpc", tag)
	t.Logf("make images-push to an empty registry: %.0fs", time.Since(start).Seconds())

	var cluster struct {
		Images       map[string]string `json:"images"`
		PopulateJail struct {
			Image string `json:"image"`
		} `json:"populateJail"`
	}
	readYAML(t, filepath.Join(out, "cluster-images-values.yaml"), &cluster)
	var operator struct {
		Image struct{ Repository, Tag, Digest string } `json:"image"`
	}
	readYAML(t, filepath.Join(out, "operator-images-values.yaml"), &operator)

	// What was built: each image's manifest by platform in its OCI layout (hack/images.sh prints
	// "REFERENCE LAYOUT"; everything is cached by now).
	built := map[string]map[string]string{}
	for _, line := range strings.Split(e.sh("", "env", "IMAGES=munge controller accounting worker login jail manager exporter", "hack/images.sh"), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.Contains(f[0], "/slurm-k8s/") {
			continue
		}
		repo := f[0][:strings.LastIndex(f[0], ":")]
		built[repo[strings.LastIndex(repo, "/")+1:]] = layoutManifests(t, f[1])
	}
	pinned := map[string]string{
		"slurmctld": cluster.Images["controller"], "slurmd": cluster.Images["worker"], "login": cluster.Images["login"],
		"slurmdbd": cluster.Images["accounting"], "munge": cluster.Images["munge"], "exporter": cluster.Images["exporter"],
		"jail":           cluster.PopulateJail.Image,
		"slurm-operator": operator.Image.Repository + ":" + operator.Image.Tag + "@" + operator.Image.Digest,
	}
	arm64Images := map[string]string{}
	pinnedRef := regexp.MustCompile(`^` + regexp.QuoteMeta(registry) + `/hpc/([a-z-]+):` + regexp.QuoteMeta(tag) + `@(sha256:[0-9a-f]{64})$`)
	for name, ref := range pinned {
		m := pinnedRef.FindStringSubmatch(ref)
		if m == nil || m[1] != name {
			t.Errorf("%s is pinned as %q, want %s/hpc/%s:%s@sha256:…", name, ref, registry, name, tag)
			continue
		}
		tagged := ref[:strings.Index(ref, "@")]
		// The tag names an image index (a multi-platform manifest) whose digest is the pinned one.
		if got := strings.TrimSpace(ask("digest", tagged)); got != m[2] {
			t.Errorf("%s: the tag's digest is %s, the values pin %s", name, got, m[2])
		}
		var index ociIndex
		if err := json.Unmarshal([]byte(ask("manifest", ref)), &index); err != nil {
			t.Fatalf("%s: manifest: %v", name, err)
		}
		if index.MediaType != "application/vnd.oci.image.index.v1+json" {
			t.Errorf("%s: %s, want an OCI image index", name, index.MediaType)
			continue
		}
		// linux/amd64 for every image; linux/arm64 too for the static Go binaries.
		pushed := map[string]string{}
		for _, m := range index.Manifests {
			pushed[m.Platform.OS+"/"+m.Platform.Architecture] = m.Digest
		}
		want := []string{"linux/amd64"}
		if arm64 || name == "slurm-operator" || name == "exporter" {
			want = append(want, "linux/arm64")
		}
		if len(pushed) != len(want) {
			t.Errorf("%s: the index names %v, want %v", name, pushed, want)
		}
		for _, platform := range want {
			digest := pushed[platform]
			if digest == "" || digest != built[name][platform] {
				t.Errorf("%s: the index names %q for %s; the image built here is %q", name, digest, platform, built[name][platform])
				continue
			}
			var config struct{ OS, Architecture string }
			image := tagged[:strings.LastIndex(tagged, ":")] + "@" + digest
			if err := json.Unmarshal([]byte(ask("config", image)), &config); err != nil {
				t.Fatalf("%s: config: %v", name, err)
			}
			if config.OS+"/"+config.Architecture != platform {
				t.Errorf("%s: the %s image's config says %s/%s", name, platform, config.OS, config.Architecture)
			}
			if platform == "linux/arm64" {
				// The programs in the arm64 image are arm64 programs.
				for _, binary := range arm64Programs[name] {
					if machine := elfMachine(t, crane, image, binary); machine != elf.EM_AARCH64 {
						t.Errorf("%s: /%s in the arm64 image is for %v", name, binary, machine)
					}
				}
				if arm64 && name != "slurm-operator" && name != "exporter" {
					arm64Images[name] = image
				}
			}
		}
	}
	if arm64 {
		runArm64Images(t, e, crane, arm64Images)
	}

	// Every blob of the smaller images downloaded again and checked against its digest (the
	// jail, 600 MB, is checked by its manifest above).
	for _, name := range []string{"exporter", "slurmctld"} {
		ask("validate", "--remote", pinned[name])
	}

	// The charts take the values files as they are: every image of the cluster and the
	// operator's own is the pinned reference.
	rendered := e.helm("template", "demo", "charts/helm-slurm-cluster", "-f", filepath.Join(out, "cluster-images-values.yaml"),
		"--set", "slurmNodes.login.sshRootPublicKeys[0]=ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB1 test")
	var sc struct {
		Spec struct {
			Images       map[string]any `json:"images"`
			PopulateJail struct {
				Image string `json:"image"`
			} `json:"populateJail"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(rendered), &sc); err != nil {
		t.Fatalf("helm template helm-slurm-cluster: %v\n%s", err, rendered)
	}
	for field, name := range map[string]string{"controller": "slurmctld", "worker": "slurmd", "login": "login", "accounting": "slurmdbd", "munge": "munge", "exporter": "exporter"} {
		if sc.Spec.Images[field] != pinned[name] {
			t.Errorf("the chart's spec.images.%s = %v, want %s", field, sc.Spec.Images[field], pinned[name])
		}
	}
	if sc.Spec.PopulateJail.Image != pinned["jail"] {
		t.Errorf("the chart's spec.populateJail.image = %s, want %s", sc.Spec.PopulateJail.Image, pinned["jail"])
	}
	deployment := e.helm("template", "slurm-operator", "charts/slurm-operator", "-f", filepath.Join(out, "operator-images-values.yaml"), "--show-only", "templates/deployment.yaml")
	if !strings.Contains(deployment, `image: "`+pinned["slurm-operator"]+`"`) {
		t.Errorf("the operator's Deployment does not run %s:\n%s", pinned["slurm-operator"], deployment)
	}

	// Pushed again unchanged: the same digests (a release's values stay valid).
	e.sh("", "hack/images-push.sh", registry+"/hpc", tag)
	var again struct {
		Images map[string]string `json:"images"`
	}
	readYAML(t, filepath.Join(out, "cluster-images-values.yaml"), &again)
	if len(again.Images) != len(cluster.Images) || len(cluster.Images) != 6 {
		t.Errorf("the values files set %d and then %d images, want the six of spec.images", len(cluster.Images), len(again.Images))
	}
	for field, ref := range again.Images {
		if ref != cluster.Images[field] {
			t.Errorf("pushed again, spec.images.%s is %s, was %s", field, ref, cluster.Images[field])
		}
	}
}

// layoutManifests is the image manifest of each platform in an OCI layout of one image, or of
// one multi-platform image (an index in the layout's index.json).
func layoutManifests(t *testing.T, dir string) map[string]string {
	t.Helper()
	var index ociIndex
	readYAML(t, filepath.Join(dir, "index.json"), &index)
	if len(index.Manifests) == 1 && index.Manifests[0].MediaType == "application/vnd.oci.image.index.v1+json" {
		readYAML(t, filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")), &index)
	}
	out := map[string]string{}
	for _, m := range index.Manifests {
		out[m.Platform.OS+"/"+m.Platform.Architecture] = m.Digest
	}
	return out
}

// elfMachine is the machine of the program at /name in an image, read from `crane export`.
func elfMachine(t *testing.T, crane, image, name string) elf.Machine {
	t.Helper()
	cmd := exec.Command(crane, "export", image, "-")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	tr := tar.NewReader(stdout)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s in %s: %v", name, image, err)
		}
		if strings.TrimPrefix(h.Name, "/") != name {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s in %s: %v", name, image, err)
		}
		return f.Machine
	}
}

// ociIndex is the part of an OCI image index (or a layout's index.json) the test reads.
type ociIndex struct {
	MediaType string `json:"mediaType"`
	Manifests []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Platform  struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	} `json:"manifests"`
}

// startRegistry runs crane's registry server on a free port of 127.0.0.1 for the test's life,
// storing blobs under dir, and returns its host:port.
func startRegistry(t *testing.T, crane, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, crane, "registry", "serve", "--address", "127.0.0.1:0", "--disk", dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	port := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`serving on port (\d+)`)
		for s.Scan() {
			if m := re.FindStringSubmatch(s.Text()); m != nil {
				port <- m[1]
			}
		}
	}()
	select {
	case p := <-port:
		return "127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatal("the registry server did not say its port within 30 s")
		return ""
	}
}

// readYAML reads a YAML or JSON file into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
