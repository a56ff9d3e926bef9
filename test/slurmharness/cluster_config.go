package slurmharness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Host is one machine of the test cluster: its own network, UTS, mount and cgroup namespaces
// over a private copy-on-write view of the root file system.
type Host struct {
	// Name is the host name (the UTS hostname, what `hostname` and srun print), e.g.
	// "demo-worker-0". It must be unique in the cluster.
	Name string
	// Aliases are extra names that resolve to this host in every host's /etc/hosts, e.g.
	// "demo-accounting" for a Service name.
	Aliases []string
	// SlurmName is, for workers, the Slurm NodeName slurmd registers as (slurmd -N), e.g.
	// "worker-0". Empty: slurmd finds its node by host name.
	SlurmName string
	// GPUs is, for workers, the number of fake GPUs: character devices /dev/nvidia0..N-1
	// (major 195) and /dev/nvidiactl in the host's private /dev.
	GPUs int
	// SlurmdArgs are extra slurmd arguments for a worker, e.g. "-Z", "--conf", "Feature=x"
	// for a dynamic node.
	SlurmdArgs []string
	// SlurmdScript, when set, starts a worker's slurmd instead: /bin/sh -c SlurmdScript with
	// SLURM_NODE_NAME (SlurmName) and SlurmdEnv in its environment. It must exec slurmd, as a
	// worker container's script does.
	SlurmdScript string
	// SlurmdEnv are NAME=value pairs for SlurmdScript.
	SlurmdEnv []string
	// RunFiles are files written into the host's private /run before its daemons start, by
	// absolute path under /run: what a pod's entrypoint writes there, such as a worker's own
	// gres.conf lines (slurmfacts.NodeGresConf).
	RunFiles map[string][]byte
	// RootFS, when set, is this host's root file system instead of Config.RootFS: another
	// Slurm release, as a pod of another image (hack/slurm-rootfs.sh --release).
	RootFS string
}

// DB names the accounting database and its user, as slurmdbd.conf uses them.
type DB struct {
	Name, User, Password string
}

// Config describes a cluster. Config files are used byte for byte: the harness never edits
// them, so what is tested is exactly what the caller rendered.
type Config struct {
	// RootFS is the Debian root file system with Slurm (hack/slurm-rootfs.sh --print-dir).
	// It is only ever read: every host writes to its own overlay.
	RootFS string
	// SlurmFiles are the files of /etc/slurm (slurm.conf, gres.conf, cgroup.conf,
	// plugstack.conf, ...), by base name. Every host sees the same folder.
	SlurmFiles map[string][]byte
	// MungeKey is the munge key of every host.
	MungeKey []byte

	Controller Host
	// BackupController, when set, is a second slurmctld host: slurm.conf's second SlurmctldHost.
	// The two share one StateSaveLocation (/var/spool/slurmctld), as a ReadWriteMany volume
	// shares it between two controller pods.
	BackupController *Host
	// SharedState, when set with BackupController, is the folder both controllers use as
	// StateSaveLocation instead of one in the cluster's folder: a network file system's mount
	// (CephFS here), as a spool claim on NFS or CephFS. The harness makes it SlurmUser's and
	// leaves it in place.
	SharedState string
	Workers     []Host
	// Logins are hosts with munged and the client commands only (srun, sbatch, sinfo).
	Logins []Host
	// Accounting, when set, is the host that runs MariaDB and slurmdbd. It may name the
	// controller host, which then runs them too.
	Accounting *Host
	// SlurmdbdConf is slurmdbd.conf (written mode 0600, owner slurm). Required with
	// Accounting.
	SlurmdbdConf []byte
	// DB is the database and user the harness creates in MariaDB (root uses socket auth).
	// Empty fields are taken from slurmdbd.conf (StorageLoc, StorageUser, StoragePass).
	DB DB
	// JWTKey, when set, is written (mode 0600, owner slurm) on the controller and the
	// accounting host at the jwt_key= path of AuthAltParameters in slurm.conf and
	// slurmdbd.conf (StateSaveLocation/jwt_hs256.key when slurm.conf enables auth/jwt
	// without a path).
	JWTKey []byte
}

func validate(cfg *Config) error {
	if cfg.RootFS == "" {
		return errors.New("slurmharness: Config.RootFS is empty (see hack/slurm-rootfs.sh)")
	}
	if err := checkRootFS(cfg.RootFS); err != nil {
		return err
	}
	if _, ok := cfg.SlurmFiles["slurm.conf"]; !ok {
		return errors.New("slurmharness: Config.SlurmFiles has no slurm.conf")
	}
	for name := range cfg.SlurmFiles {
		if err := checkFileName(name); err != nil {
			return err
		}
	}
	if len(cfg.MungeKey) == 0 {
		return errors.New("slurmharness: Config.MungeKey is empty")
	}
	if cfg.SharedState != "" && (cfg.BackupController == nil || !filepath.IsAbs(cfg.SharedState)) {
		return fmt.Errorf("slurmharness: Config.SharedState %q needs a BackupController and an absolute path", cfg.SharedState)
	}
	if cfg.Accounting != nil && len(cfg.SlurmdbdConf) == 0 {
		return errors.New("slurmharness: Config.SlurmdbdConf is required with Config.Accounting")
	}
	seen := map[string]bool{}
	all := append([]Host{cfg.Controller}, cfg.Workers...)
	if cfg.BackupController != nil {
		all = append(all, *cfg.BackupController)
	}
	all = append(all, cfg.Logins...)
	if cfg.Accounting != nil && cfg.Accounting.Name != cfg.Controller.Name {
		all = append(all, *cfg.Accounting)
	}
	for _, h := range all {
		if err := checkHostName(h.Name); err != nil {
			return err
		}
		if h.RootFS != "" {
			if err := checkRootFS(h.RootFS); err != nil {
				return err
			}
		}
		for p := range h.RunFiles {
			if p != filepath.Clean(p) || !strings.HasPrefix(p, "/run/") {
				return fmt.Errorf("slurmharness: host %q: RunFiles path %q is not a clean path under /run", h.Name, p)
			}
		}
		if seen[h.Name] {
			return fmt.Errorf("slurmharness: host %q appears twice", h.Name)
		}
		seen[h.Name] = true
	}
	return nil
}

// checkRootFS refuses a folder that is no Slurm root file system or cannot be an overlay's
// lower folder.
func checkRootFS(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, "usr/sbin/slurmctld")); err != nil { // a link to /etc/alternatives
		return fmt.Errorf("slurmharness: %s is not a Slurm root file system: %w", dir, err)
	}
	if strings.ContainsAny(dir, ",:") {
		return fmt.Errorf("slurmharness: root file system path %q cannot hold ',' or ':' (overlay options)", dir)
	}
	return nil
}

func checkHostName(name string) error {
	if name == "" || len(name) > 63 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != "" || strings.HasPrefix(name, ".") {
		return fmt.Errorf("slurmharness: %q is not a valid host name", name)
	}
	return nil
}

func checkFileName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("slurmharness: %q is not a file name", name)
	}
	return nil
}
