package gpu

import (
	"regexp"
	"strings"
)

// Labels of the NVIDIA GPU Operator (GPU feature discovery) that the shape is read from.
const (
	LabelPresent     = "nvidia.com/gpu.present"
	LabelCount       = "nvidia.com/gpu.count"
	LabelProduct     = "nvidia.com/gpu.product"
	LabelMemory      = "nvidia.com/gpu.memory"
	LabelMIGStrategy = "nvidia.com/mig.strategy"
	// MIG profile counts are labelled nvidia.com/mig-<profile>.count (strategy mixed).
	labelMIGPrefix = "nvidia.com/mig-"
	labelMIGSuffix = ".count"
)

// IsShapeLabel reports whether a node label key takes part in the GPU shape. Changes to other
// labels never re-render anything, but for the labels a cluster's topology names.
func IsShapeLabel(key string) bool {
	switch key {
	case LabelPresent, LabelCount, LabelProduct, LabelMemory, LabelMIGStrategy:
		return true
	}
	return strings.HasPrefix(key, labelMIGPrefix) && strings.HasSuffix(key, labelMIGSuffix)
}

var nonToken = regexp.MustCompile(`[^a-z0-9]+`)

// GresType turns a GPU product label into a short Slurm gres type:
// NVIDIA-H100-80GB-HBM3 → h100, NVIDIA-A100-SXM4-40GB → a100, Tesla-V100-SXM2-16GB → v100,
// NVIDIA-GeForce-RTX-4090 → rtx4090, NVIDIA-L40S → l40s. A MIG product
// (NVIDIA-A100-SXM4-40GB-MIG-1g.5gb) keeps its profile: a100-1g.5gb.
func GresType(product string) string {
	p := product
	profile := ""
	if i := strings.Index(p, "-MIG-"); i >= 0 {
		profile = strings.ToLower(p[i+len("-MIG-"):])
		p = p[:i]
	}
	words := strings.FieldsFunc(p, func(r rune) bool { return r == '-' || r == '_' || r == ' ' })
	for len(words) > 0 {
		switch strings.ToLower(words[0]) {
		case "nvidia", "tesla", "geforce", "quadro":
			words = words[1:]
			continue
		}
		break
	}
	if len(words) == 0 {
		return ""
	}
	t := strings.ToLower(words[0])
	if (t == "rtx" || t == "gtx") && len(words) > 1 {
		t += strings.ToLower(words[1])
	}
	t = nonToken.ReplaceAllString(t, "")
	if profile != "" {
		t += "-" + profile
	}
	return t
}
