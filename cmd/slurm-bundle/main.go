// slurm-bundle runs at image build time: it copies the Slurm packages installed in the image
// (and the libraries they need) into a bundle that the jail entrypoint shows inside the jail.
//
//	slurm-bundle [--root DIR] [--out DIR] [--extra PATH,...]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurmbundle"
)

func main() {
	root := flag.String("root", "/", "the root file system whose installed Slurm packages are bundled")
	out := flag.String("out", slurmbundle.DefaultDir, "the bundle directory to write (it should not exist)")
	extra := flag.String("extra", "", "more files of the root to bundle, comma-separated absolute paths (SSSD's client side)")
	flag.Parse()
	if _, err := os.Stat(*out); err == nil {
		fmt.Fprintf(os.Stderr, "slurm-bundle: %s exists already\n", *out)
		os.Exit(1)
	}
	var files []string
	if *extra != "" {
		files = strings.Split(*extra, ",")
	}
	m, err := slurmbundle.Make(*root, *out, files...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "slurm-bundle: %v\n", err)
		os.Exit(1)
	}
	count := map[slurmbundle.Kind]int{}
	for _, e := range m.Entries {
		count[e.Kind]++
	}
	fmt.Printf("slurm-bundle: Slurm %s in %s: %d directories, %d files, %d links, %d libraries, %d extras\n",
		m.Version, *out, count[slurmbundle.Dir], count[slurmbundle.File], count[slurmbundle.Link], count[slurmbundle.Lib], count[slurmbundle.Extra])
}
