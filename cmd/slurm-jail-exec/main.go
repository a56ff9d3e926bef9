// slurm-jail-exec is the entrypoint of the login and worker images: it binds into the jail what
// belongs to this pod and runs its command chrooted in the jail.
//
//	slurm-jail-exec [--jail DIR] [--bind SRC:DST[:ro]]... [--slurm-bundle DIR] [--pivot]
//	    [--gpus N [--gres-conf FILE] [--gpu-type TYPE] [--gpu-topology SOCKETS:CORES]] -- COMMAND [ARG]...
//	slurm-jail-exec [--jail DIR] --wait-populated
//
// The first form sets the jail up once per container (later calls from probes, hooks and
// `kubectl exec` find it set up and only chroot). The second waits until the populate Job has
// marked the jail complete; login and worker pods run it as an init container.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/jailexec"
	"github.com/slurm-k8s/slurm-operator/internal/slurmbundle"
)

type binds []jailexec.Bind

func (b *binds) String() string { return fmt.Sprint(*b) }
func (b *binds) Set(s string) error {
	v, err := jailexec.ParseBind(s)
	if err != nil {
		return err
	}
	*b = append(*b, v)
	return nil
}

func main() {
	var cfg jailexec.Config
	var extra binds
	var wait, pivot, pivotChild bool
	fs := flag.NewFlagSet("slurm-jail-exec", flag.ContinueOnError)
	fs.StringVar(&cfg.Jail, "jail", "/mnt/jail", "where the jail volume is mounted")
	fs.Var(&extra, "bind", "SRC:DST[:ro]: bind the container's SRC on DST in the jail (repeatable)")
	fs.StringVar(&cfg.Root, "driver-from", "/", "the root to look for the GPU driver's files under")
	fs.StringVar(&cfg.SlurmBundle, "slurm-bundle", slurmbundle.DefaultDir, "the image's Slurm, shown in the jail over the jail's own (nothing is shown where it is missing)")
	fs.BoolVar(&cfg.SSSDClient, "sssd-client", false, "show SSSD's client side from the image's bundle in the jail too (a cluster whose users come from a directory)")
	fs.BoolVar(&wait, "wait-populated", false, "wait until the jail is populated, then exit")
	fs.BoolVar(&pivot, "pivot", false, "run the command in a mount namespace of its own whose root is the jail (pivot_root), so its children may make user namespaces (rootless Podman); this process stays, as their init")
	jailexec.GPUFlags(fs, &cfg)
	fs.BoolVar(&pivotChild, "pivot-child", false, "(internal) the child --pivot starts, in its new mount namespace")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: slurm-jail-exec [--jail DIR] [--bind SRC:DST[:ro]]... -- COMMAND [ARG]...")
		fmt.Fprintln(fs.Output(), "       slurm-jail-exec [--jail DIR] --wait-populated")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	cfg.Binds = extra
	cfg.VisibleDevices = os.Getenv(jailexec.VisibleDevicesEnv)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "slurm-jail-exec: "+format+"\n", args...)
	}
	if wait {
		waitPopulated(cfg.Jail, logf)
		return
	}
	if fs.NArg() == 0 {
		fs.Usage()
		os.Exit(2)
	}
	if pivotChild {
		// The parent set the jail up in the container's namespace; this one is a copy of it.
		if err := jailexec.PivotExec(cfg.Jail, fs.Args(), os.Environ()); err != nil {
			logf("%v", err)
			os.Exit(127)
		}
	}
	if err := jailexec.Setup(cfg, logf); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	env := os.Environ()
	if !hasVar(env, "PATH") {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if pivot {
		code, err := jailexec.RunPivoted("/proc/self/exe", cfg.Jail, fs.Args(), env)
		if err != nil {
			logf("%v", err)
		}
		os.Exit(code)
	}
	if err := jailexec.Exec(cfg.Jail, fs.Args(), env); err != nil {
		logf("%v", err)
		os.Exit(127)
	}
}

func waitPopulated(jail string, logf func(string, ...any)) {
	start := time.Now()
	last := time.Time{}
	for {
		err := jailexec.CheckPopulated(jail)
		if err == nil {
			logf("the jail at %s is populated", jail)
			return
		}
		if time.Since(last) >= 30*time.Second {
			logf("waiting for the populate Job (%v, %s so far)", err, time.Since(start).Round(time.Second))
			last = time.Now()
		}
		time.Sleep(2 * time.Second)
	}
}

func hasVar(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}
