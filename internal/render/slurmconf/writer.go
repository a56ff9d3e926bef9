package slurmconf

import (
	"fmt"
	"strings"
)

// writer builds a config file: a header, then Key=Value lines in the order they are added.
type writer struct{ b strings.Builder }

func newWriter(header string) *writer {
	w := &writer{}
	for _, l := range strings.Split(header, "\n") {
		w.b.WriteString("# " + l + "\n")
	}
	return w
}

func (w *writer) kv(key string, value any) {
	fmt.Fprintf(&w.b, "%s=%s\n", key, oneLine(fmt.Sprint(value)))
}

func (w *writer) line(s string) { w.b.WriteString(oneLine(s) + "\n") }

func (w *writer) blank() { w.b.WriteString("\n") }

func (w *writer) comment(s string) { w.b.WriteString("# " + oneLine(s) + "\n") }

func (w *writer) String() string { return w.b.String() }

// oneLine folds any line break into a space, so a value can never start a new setting.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
