package slurmfacts

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is a Slurm major release, named by its year and month: 24.11, 26.05.
type Release struct {
	Year, Month int
}

func (r Release) String() string { return fmt.Sprintf("%02d.%02d", r.Year, r.Month) }

// UpgradeWindow is how many major releases Slurm upgrades over in place: since 24.11, daemons
// and their state from any of the previous three releases (24.11 to 26.05 directly).
const UpgradeWindow = 3

// ParseRelease reads the release at the start of a version or tag: "24.11", "24.11.5",
// "24.11.5-1", "26.05-nvml", "slurm-wlm 24.11.5", "v26.05".
func ParseRelease(s string) (Release, bool) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, " "); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimPrefix(s, "v")
	yy, rest, ok := strings.Cut(s, ".")
	if !ok || len(yy) != 2 || len(rest) < 2 {
		return Release{}, false
	}
	mm := rest[:2]
	if len(rest) > 2 && rest[2] >= '0' && rest[2] <= '9' {
		return Release{}, false
	}
	y, err1 := strconv.Atoi(yy)
	m, err2 := strconv.Atoi(mm)
	if err1 != nil || err2 != nil || m < 1 || m > 12 {
		return Release{}, false
	}
	return Release{Year: y, Month: m}, true
}

// ImageRelease reads the release from an image reference's tag (REGISTRY/slurm-k8s/slurmd:24.11);
// a reference without a tag, or whose tag names no release (latest, a digest), gives none.
func ImageRelease(image string) (Release, bool) {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon < 0 || colon < slash {
		return Release{}, false
	}
	return ParseRelease(image[colon+1:])
}

// Compare orders releases: negative when r is older than o.
func (r Release) Compare(o Release) int {
	if r.Year != o.Year {
		return r.Year - o.Year
	}
	return r.Month - o.Month
}

// ReleasesTo counts the major releases from r to o. Slurm has released in May and November
// since 23.11; older releases count the same way, by half years.
func (r Release) ReleasesTo(o Release) int { return o.halfYear() - r.halfYear() }

func (r Release) halfYear() int {
	h := r.Year * 2
	if r.Month > 6 {
		h++
	}
	return h
}

// CheckUpgrade says why Slurm cannot go from one release to another in place: a downgrade (the
// state files and database of the newer release are not readable by the older) or a jump over
// more than UpgradeWindow releases. Nil when it can, or when the release stays.
func CheckUpgrade(from, to Release) error {
	switch c := from.Compare(to); {
	case c == 0:
		return nil
	case c > 0:
		return fmt.Errorf("cannot downgrade Slurm %s to %s: the older release cannot read the newer one's state and database", from, to)
	}
	if n := from.ReleasesTo(to); n > UpgradeWindow {
		return fmt.Errorf("cannot upgrade Slurm %s to %s in one step: that is %d releases, and Slurm upgrades over at most %d; upgrade through an intermediate release first", from, to, n, UpgradeWindow)
	}
	return nil
}
