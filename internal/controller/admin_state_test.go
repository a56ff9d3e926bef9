package controller_test

import (
	"context"
	"errors"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// adminSlurm answers with the node states it was given (a drain adds DRAIN and the reason) and
// records every drain and resume asked of it: it stands in for a slurmctld whose nodes an admin
// set down, drained or failed by hand, or whose nodes are all idle.
type adminSlurm struct {
	mu      sync.Mutex
	nodes   []slurm.Node
	drained []string
	resumed []string
}

var _ controller.SlurmAPI = (*adminSlurm)(nil)

func (a *adminSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]slurm.Node(nil), a.nodes...), nil
}

func (a *adminSlurm) Drain(_ context.Context, name, reason string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drained = append(a.drained, name)
	for i := range a.nodes {
		if a.nodes[i].Name == name {
			a.nodes[i].State = append(a.nodes[i].State, "DRAIN")
			a.nodes[i].Reason = reason
		}
	}
	return nil
}

func (a *adminSlurm) ResumeIfOwned(_ context.Context, name string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.resumed = append(a.resumed, name)
	return false, nil
}

// SetAddress records the address on the node (these specs' pods have none, so it is not asked).
func (a *adminSlurm) SetAddress(_ context.Context, name, address string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.nodes {
		if a.nodes[i].Name == name {
			a.nodes[i].Address = address
		}
	}
	return nil
}

// SetPower is not asked: these specs have no elastic set.
func (a *adminSlurm) SetPower(context.Context, string, bool) error {
	return errors.New("no elastic set here: SetPower is not expected")
}

// SetJobAdminComment is not asked: only jobs waiting for elastic sets' pods are commented.
func (a *adminSlurm) SetJobAdminComment(context.Context, int64, string) error {
	return errors.New("no elastic set here: SetJobAdminComment is not expected")
}

// SetNodeComment is not asked: only elastic sets' pods that cannot start comment nodes.
func (a *adminSlurm) SetNodeComment(context.Context, string, string) error {
	return errors.New("no elastic set here: SetNodeComment is not expected")
}

// Jobs is not asked: only an elastic set's ended power-ups read the job list.
func (a *adminSlurm) Jobs(context.Context) ([]slurm.Job, error) {
	return nil, errors.New("no elastic set here: Jobs is not expected")
}

func (a *adminSlurm) calls() ([]string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.drained...), append([]string(nil), a.resumed...)
}

var _ = Describe("a scale-down over nodes an admin set down, failed or drained", func() {
	It("keeps the admin's state and reason, and removes a node only once it runs nothing", func(ctx SpecContext) {
		fake := &adminSlurm{nodes: []slurm.Node{
			{Name: "worker-0", State: []string{"IDLE"}}, {Name: "worker-1", State: []string{"IDLE"}},
			{Name: "worker-2", State: []string{"IDLE"}}, {Name: "worker-3", State: []string{"IDLE"}},
			{Name: "worker-4", State: []string{"IDLE"}},
			{Name: "worker-5", State: []string{"MIXED", "DRAIN"}, Reason: "bad DIMM, ticket 4711", AllocCPUs: 4},
			{Name: "worker-6", State: []string{"IDLE", "FAIL"}, Reason: "fan failure"},
			{Name: "worker-7", State: []string{"DOWN"}, Reason: "PSU swap tomorrow"},
		}}
		ns := newNamespace(ctx)
		slurmClients.Store(ns, fake)
		DeferCleanup(func() { slurmClients.Delete(ns) })
		applySample(ctx, ns, "admin")
		get(ctx, &appsv1.StatefulSet{}, ns, "admin-worker")

		updateSpec(ctx, ns, "admin", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 5 })

		// worker-5 runs a job under the admin's drain: the scale-down waits for it, and drains
		// nothing (worker-6 failed and worker-7 down keep their state and reason).
		eventuallyCondition(ctx, ns, "admin", "ScalingDown", "WaitingForJobs", "worker-5")
		drained, resumed := fake.calls()
		Expect(drained).To(BeEmpty(), "the admin's nodes were drained over")
		Expect(resumed).To(BeEmpty())
		Expect(get(ctx, &appsv1.StatefulSet{}, ns, "admin-worker").Spec.Replicas).To(Equal(ptr.To[int32](8)))

		// The job ends: the node is drained and idle, and the workers go.
		fake.mu.Lock()
		fake.nodes[5] = slurm.Node{Name: "worker-5", State: []string{"IDLE", "DRAIN"}, Reason: "bad DIMM, ticket 4711"}
		fake.mu.Unlock()
		Eventually(func() *int32 {
			return get(ctx, &appsv1.StatefulSet{}, ns, "admin-worker").Spec.Replicas
		}).WithTimeout(timeout).Should(Equal(ptr.To[int32](5)))
		drained, _ = fake.calls()
		Expect(drained).To(BeEmpty(), "the admin's nodes were drained over")
	})
})
