package exporter

import (
	"sort"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// snapshot is the answers one scrape exports; a nil field was not answered (or is too old).
type snapshot struct {
	nodes         []slurm.Node
	jobs          []slurm.Job
	diag          *slurm.Diag
	pings         []slurm.Ping
	databasePings []slurm.Ping
	hasNodes      bool
	hasJobs       bool
}

func (s *snapshot) set(r resource, v any) {
	switch r {
	case resNodes:
		s.nodes, s.hasNodes = v.([]slurm.Node), true
	case resJobs:
		s.jobs, s.hasJobs = v.([]slurm.Job), true
	case resDiag:
		d := v.(slurm.Diag)
		s.diag = &d
	case resPing:
		s.pings = v.([]slurm.Ping)
	case resDatabase:
		s.databasePings = v.([]slurm.Ping)
	}
}

func (s *snapshot) databaseUp() bool {
	for _, p := range s.databasePings {
		if p.Responding {
			return true
		}
	}
	return false
}

func (s *snapshot) emit(e *emitter, opt Options) {
	if s.hasNodes {
		emitNodes(e, s.nodes)
	}
	if s.hasJobs {
		emitJobs(e, s.jobs, opt.PerUser)
	}
	if s.diag != nil {
		emitDiag(e, *s.diag, opt.PerUser)
	}
	for _, p := range s.pings {
		e.add(controllerUp, boolValue(p.Responding && p.Pinged == "UP"), p.Host, p.Mode)
		e.add(controllerLat, float64(p.Latency)/1e6, p.Host, p.Mode)
	}
}

const mib = 1 << 20

// capacity is CPUs, memory (bytes) and GPUs by type: total and allocated.
type capacity struct {
	cpus, cpusAlloc int64
	mem, memAlloc   int64
	gpus, gpusAlloc map[string]int64
}

func (c *capacity) addNode(n slurm.Node) {
	if c.gpus == nil {
		c.gpus, c.gpusAlloc = map[string]int64{}, map[string]int64{}
	}
	c.cpus += n.CPUs
	c.cpusAlloc += n.AllocCPUs
	c.mem += n.RealMemory * mib
	c.memAlloc += n.AllocMemory * mib
	used := GPUsByType(n.GresUsed)
	for typ, count := range GPUsByType(n.Gres) {
		c.gpus[typ] += count
		c.gpusAlloc[typ] += used[typ]
	}
}

type capacityFamilies struct {
	cpus, cpusA, cpusI, mem, memA, memI, gpus, gpusA, gpusI *family
}

var (
	nodeCapacity = capacityFamilies{nodeCPUs, nodeCPUsA, nodeCPUsI, nodeMem, nodeMemA, nodeMemI, nodeGPUs, nodeGPUsA, nodeGPUsI}
	partCapacity = capacityFamilies{partCPUs, partCPUsA, partCPUsI, partMem, partMemA, partMemI, partGPUs, partGPUsA, partGPUsI}
	setCapacity  = capacityFamilies{setCPUs, setCPUsA, setCPUsI, setMem, setMemA, setMemI, setGPUs, setGPUsA, setGPUsI}
)

func (c capacity) emit(e *emitter, f capacityFamilies, key string) {
	e.add(f.cpus, float64(c.cpus), key)
	e.add(f.cpusA, float64(c.cpusAlloc), key)
	e.add(f.cpusI, float64(max(c.cpus-c.cpusAlloc, 0)), key)
	e.add(f.mem, float64(c.mem), key)
	e.add(f.memA, float64(c.memAlloc), key)
	e.add(f.memI, float64(max(c.mem-c.memAlloc, 0)), key)
	for _, typ := range sortedKeys(c.gpus) {
		e.add(f.gpus, float64(c.gpus[typ]), key, typ)
		e.add(f.gpusA, float64(c.gpusAlloc[typ]), key, typ)
		e.add(f.gpusI, float64(max(c.gpus[typ]-c.gpusAlloc[typ], 0)), key, typ)
	}
}

// stateKey is a node state with who drained it and why.
type stateKey struct{ state, owner, reason string }

func emitNodes(e *emitter, nodes []slurm.Node) {
	parts, sets := newGroups(), newGroups()
	for _, n := range nodes {
		state := slurm.NodeState(n)
		owner := slurm.ReasonOwner(n, state)
		key := stateKey{state, owner, slurm.OperatorReason(n, owner)}
		e.add(nodeState, 1, n.Name, key.state, key.owner, key.reason)
		if n.Reason != "" && slurm.OutOfService(key.state) && n.ReasonAt.Set && n.ReasonAt.Number > 0 {
			e.add(nodeReason, float64(n.ReasonAt.Number), n.Name, key.state, key.owner, key.reason, n.ShownReason(), n.ReasonBy)
		}
		var c capacity
		c.addNode(n)
		c.emit(e, nodeCapacity, n.Name)
		for _, p := range n.Partitions {
			parts.add(p, n, key)
		}
		if set := NodeSetOf(n.Name); set != "" {
			e.add(nodeSet, 1, n.Name, set)
			sets.add(set, n, key)
		}
	}
	parts.emit(e, partCapacity, partNodes)
	sets.emit(e, setCapacity, setNodes)
}

// groups sums nodes' capacity and states by a group's name (a partition, a node set).
type groups struct {
	capacity map[string]*capacity
	states   map[string]map[stateKey]int
}

func newGroups() groups {
	return groups{capacity: map[string]*capacity{}, states: map[string]map[stateKey]int{}}
}

func (g groups) add(name string, n slurm.Node, key stateKey) {
	if g.capacity[name] == nil {
		g.capacity[name], g.states[name] = &capacity{}, map[stateKey]int{}
	}
	g.capacity[name].addNode(n)
	g.states[name][key]++
}

func (g groups) emit(e *emitter, f capacityFamilies, nodes *family) {
	for _, name := range sortedKeys(g.capacity) {
		g.capacity[name].emit(e, f, name)
		for k, count := range g.states[name] {
			e.add(nodes, float64(count), name, k.state, k.owner, k.reason)
		}
	}
}

// NodeSetOf is the worker set of an operator-named Slurm node, <set>-<index>: "worker" for
// worker-3, "a100" for a100-0; "" for a name not of that form.
func NodeSetOf(name string) string {
	k := strings.LastIndexByte(name, '-')
	if k <= 0 || k == len(name)-1 {
		return ""
	}
	for _, r := range name[k+1:] {
		if r < '0' || r > '9' {
			return ""
		}
	}
	return name[:k]
}

// jobKey groups jobs for the per-partition, per-account and per-user metrics.
type jobKey struct{ partition, account, user, state string }

type jobSums struct{ jobs, cpus, gpus int64 }

func emitJobs(e *emitter, jobs []slurm.Job, perUser bool) {
	byState := map[jobKey]int64{}
	pending := map[[2]string]int64{}
	resources := map[jobKey]*jobSums{}
	byAccount := map[jobKey]*jobSums{}
	byUser := map[jobKey]*jobSums{}
	add := func(m map[jobKey]*jobSums, k jobKey, cpus, gpus int64) {
		if m[k] == nil {
			m[k] = &jobSums{}
		}
		m[k].jobs++
		m[k].cpus += cpus
		m[k].gpus += gpus
	}
	for _, j := range jobs {
		state := JobState(j)
		byState[jobKey{partition: j.Partition, state: state}]++
		var tres string
		switch state {
		case "pending":
			pending[[2]string{j.Partition, j.Reason}]++
			tres = j.TRESRequested
		case "running":
			tres = j.TRESAllocated
		default:
			continue
		}
		cpus, gpus := TRES(tres)
		add(resources, jobKey{partition: j.Partition, state: state}, cpus, gpus)
		add(byAccount, jobKey{partition: j.Partition, account: j.Account, state: state}, cpus, gpus)
		if perUser {
			add(byUser, jobKey{partition: j.Partition, account: j.Account, user: j.User, state: state}, cpus, gpus)
		}
	}
	for k, n := range byState {
		e.add(partJobs, float64(n), k.partition, k.state)
	}
	for k, n := range pending {
		e.add(partPending, float64(n), k[0], k[1])
	}
	for k, s := range resources {
		e.add(partJobCPUs, float64(s.cpus), k.partition, k.state)
		e.add(partJobGPUs, float64(s.gpus), k.partition, k.state)
	}
	for k, s := range byAccount {
		e.add(acctJobs, float64(s.jobs), k.partition, k.account, k.state)
		e.add(acctJobCPUs, float64(s.cpus), k.partition, k.account, k.state)
		e.add(acctJobGPUs, float64(s.gpus), k.partition, k.account, k.state)
	}
	for k, s := range byUser {
		e.add(userJobs, float64(s.jobs), k.partition, k.account, k.user, k.state)
		e.add(userJobCPUs, float64(s.cpus), k.partition, k.account, k.user, k.state)
		e.add(userJobGPUs, float64(s.gpus), k.partition, k.account, k.user, k.state)
	}
}

func emitDiag(e *emitter, d slurm.Diag, perUser bool) {
	const us = 1e6
	for f, v := range map[*family]float64{
		schedThreads: float64(d.ServerThreads), schedAgentQueue: float64(d.AgentQueueSize), schedDBDQueue: float64(d.DBDAgentQueueSize),
		schedCycleLast: float64(d.ScheduleCycleLast) / us, schedCycleMean: float64(d.ScheduleCycleMean) / us, schedCycleMax: float64(d.ScheduleCycleMax) / us,
		schedCycles: float64(d.ScheduleCycles), schedQueue: float64(d.ScheduleQueue),
		bfCycleLast: float64(d.BackfillCycleLast) / us, bfCycleMean: float64(d.BackfillCycleMean) / us, bfCycleMax: float64(d.BackfillCycleMax) / us,
		bfCycles: float64(d.BackfillCycles), bfQueue: float64(d.BackfillQueue), bfJobs: float64(d.BackfilledJobs), bfActive: boolValue(d.BackfillActive),
		jobsSubmitted: float64(d.JobsSubmitted), jobsStarted: float64(d.JobsStarted), jobsCompleted: float64(d.JobsCompleted),
		jobsCanceled: float64(d.JobsCanceled), jobsFailed: float64(d.JobsFailed),
	} {
		e.add(f, v)
	}
	for _, r := range d.RPCsByMessageType {
		e.add(rpcs, float64(r.Count), r.MessageType)
		e.add(rpcSeconds, float64(r.TotalTime)/us, r.MessageType)
	}
	if perUser {
		for _, r := range d.RPCsByUser {
			e.add(userRPCs, float64(r.Count), r.User)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
