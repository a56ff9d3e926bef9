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
// NVIDIA-GeForce-RTX-4090 → rtx4090, NVIDIA-L40S → l40s. A MIG product (strategy single,
// NVIDIA-A100-SXM4-40GB-MIG-1g.5gb) is its profile alone, 1g.5gb, as MIG devices are typed in
// strategy mixed: slurmd's NVML detection names a MIG device after the GPU's model and its
// profile (nvidia_a100-sxm4-40gb_1g.5gb, nvidia_h200_1g.18gb), and a configured type must be a
// substring of that name, which a100-1g.5gb is not.
func GresType(product string) string {
	if profile := MIGProfile(product); profile != "" {
		return profile
	}
	p := product
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
	return nonToken.ReplaceAllString(t, "")
}

// MIGProfile is the MIG profile of a MIG product label (strategy single:
// NVIDIA-A100-SXM4-40GB-MIG-1g.5gb → 1g.5gb), empty for a whole GPU.
func MIGProfile(product string) string {
	if i := strings.Index(product, "-MIG-"); i >= 0 {
		return strings.ToLower(product[i+len("-MIG-"):])
	}
	return ""
}
