// gpuplugin is a kubelet device plugin for the node test's stand-in GPUs: it registers
// nvidia.com/gpu over the kubelet's socket, lists /dev/nvidia0..N-1 as healthy devices, and
// answers Allocate as the NVIDIA device plugin does with deviceIDStrategy=index (the device
// files, and NVIDIA_VISIBLE_DEVICES naming the GPUs it chose). The kubelet, not this program,
// chooses which devices a container gets. It registers again whenever the kubelet restarts
// (the kubelet then removes every plugin socket).
//
//	gpuplugin [--count N] [--dir /var/lib/kubelet/device-plugins]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	resourceName = "nvidia.com/gpu"
	socketName   = "stand-in-gpu.sock"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	count int
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once: stand-in GPUs never fail.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	var devs []*pluginapi.Device
	for i := 0; i < p.count; i++ {
		devs = append(devs, &pluginapi.Device{ID: strconv.Itoa(i), Health: pluginapi.Healthy})
	}
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		ids := append([]string(nil), c.DevicesIds...)
		sort.Slice(ids, func(i, j int) bool { a, _ := strconv.Atoi(ids[i]); b, _ := strconv.Atoi(ids[j]); return a < b })
		r := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ",")}}
		for _, id := range ids {
			n, err := strconv.Atoi(id)
			if err != nil || n < 0 || n >= p.count {
				return nil, fmt.Errorf("no stand-in GPU %q", id)
			}
			dev := "/dev/nvidia" + id
			r.Devices = append(r.Devices, &pluginapi.DeviceSpec{ContainerPath: dev, HostPath: dev, Permissions: "rw"})
		}
		r.Devices = append(r.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/nvidiactl", HostPath: "/dev/nvidiactl", Permissions: "rw"})
		log.Printf("allocate %s", strings.Join(ids, ","))
		out.ContainerResponses = append(out.ContainerResponses, r)
	}
	return out, nil
}

func main() {
	count := flag.Int("count", 3, "stand-in GPUs: /dev/nvidia0..N-1")
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the kubelet's device plugin folder")
	flag.Parse()
	log.SetFlags(log.LstdFlags)
	for i := 0; i < *count; i++ {
		if _, err := os.Stat(fmt.Sprintf("/dev/nvidia%d", i)); err != nil {
			log.Fatalf("stand-in GPU %d: %v", i, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for ctx.Err() == nil {
		if err := serve(ctx, *dir, &plugin{count: *count}); err != nil {
			log.Printf("%v; again in 2s", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
}

// serve listens on the plugin's socket, registers with the kubelet, and returns when the
// kubelet restarted (its socket changed, or ours was removed) or ctx ends.
func serve(ctx context.Context, dir string, p *plugin) error {
	sock := filepath.Join(dir, socketName)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	kubelet := filepath.Join(dir, "kubelet.sock")
	before, err := os.Stat(kubelet)
	if err != nil {
		return fmt.Errorf("the kubelet's socket: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: socketName, ResourceName: resourceName,
	})
	cancel()
	conn.Close()
	if err != nil {
		return fmt.Errorf("register with the kubelet: %w", err)
	}
	log.Printf("registered %d stand-in GPUs as %s", p.count, resourceName)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
		now, err := os.Stat(kubelet)
		if err != nil || !os.SameFile(before, now) {
			return fmt.Errorf("the kubelet restarted")
		}
		if _, err := os.Stat(sock); err != nil {
			return fmt.Errorf("the kubelet removed the plugin's socket")
		}
	}
}
