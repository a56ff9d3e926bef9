// Package gpu finds the GPU shape of a cluster's workers from the labels the NVIDIA GPU
// Operator puts on Kubernetes nodes (nvidia.com/gpu.present, gpu.count, gpu.product,
// gpu.memory, mig.strategy, mig-<profile>.count) and the nodes' allocatable nvidia.com/gpu.
// It is pure: it reads node facts and a SlurmCluster and returns a shape and a verdict.
package gpu
