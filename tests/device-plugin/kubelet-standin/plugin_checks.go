package main

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// expectation is what the plugin under test was told on its command line.
type expectation struct {
	resource   string
	socketName string
	devices    int
	cdi        bool
}

func (e expectation) deviceIDs() []string {
	ids := make([]string, e.devices)
	for i := range ids {
		ids[i] = fmt.Sprintf("vgpu-%d", i)
	}
	return ids
}

func checkRegistration(r *pluginapi.RegisterRequest, want expectation) error {
	if r.Version != pluginapi.Version {
		return fmt.Errorf("registration version %q, want %q", r.Version, pluginapi.Version)
	}
	if r.Endpoint != want.socketName {
		return fmt.Errorf("registration endpoint %q, want %q", r.Endpoint, want.socketName)
	}
	if r.ResourceName != want.resource {
		return fmt.Errorf("registration resource %q, want %q", r.ResourceName, want.resource)
	}
	if r.Options == nil {
		return fmt.Errorf("registration carries no options")
	}
	if r.Options.PreStartRequired || !r.Options.GetPreferredAllocationAvailable {
		return fmt.Errorf("registration options %+v, want preferred allocation only", r.Options)
	}
	return nil
}

// pluginClient is the kubelet's side of one connection to the plugin's socket.
type pluginClient struct {
	conn   *grpc.ClientConn
	client pluginapi.DevicePluginClient
}

func dialPlugin(dir, endpoint string) (*pluginClient, error) {
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, endpoint),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &pluginClient{conn: conn, client: pluginapi.NewDevicePluginClient(conn)}, nil
}

func (p *pluginClient) close() { _ = p.conn.Close() }

func callContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

func (p *pluginClient) checkOptions() error {
	ctx, cancel := callContext()
	defer cancel()
	options, err := p.client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		return fmt.Errorf("GetDevicePluginOptions: %w", err)
	}
	if options.PreStartRequired || !options.GetPreferredAllocationAvailable {
		return fmt.Errorf("GetDevicePluginOptions %+v, want preferred allocation only", options)
	}
	return nil
}

// checkListAndWatch opens the stream, checks the first list, and returns the stream so
// that the caller can see it end when the plugin restarts.
func (p *pluginClient) checkListAndWatch(want expectation) (pluginapi.DevicePlugin_ListAndWatchClient, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := p.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("ListAndWatch: %w", err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("ListAndWatch first response: %w", err)
	}
	var ids []string
	for _, device := range first.Devices {
		if device.Health != pluginapi.Healthy {
			cancel()
			return nil, nil, fmt.Errorf("device %q health %q, want %q", device.ID, device.Health, pluginapi.Healthy)
		}
		if device.Topology != nil {
			cancel()
			return nil, nil, fmt.Errorf("device %q has a topology %v; virtual GPUs have none", device.ID, device.Topology)
		}
		ids = append(ids, device.ID)
	}
	if !reflect.DeepEqual(ids, want.deviceIDs()) {
		cancel()
		return nil, nil, fmt.Errorf("ListAndWatch devices %v, want %v", ids, want.deviceIDs())
	}
	return stream, cancel, nil
}

func cdiName(id string) string { return "gvirtus.io/vgpu=" + id }

func (p *pluginClient) checkAllocate(want expectation) ([][]string, error) {
	requests := [][]string{{"vgpu-3", "vgpu-1"}, {"vgpu-0"}}
	req := &pluginapi.AllocateRequest{}
	for _, ids := range requests {
		req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIDs: ids})
	}
	ctx, cancel := callContext()
	defer cancel()
	resp, err := p.client.Allocate(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("Allocate: %w", err)
	}
	if len(resp.ContainerResponses) != len(requests) {
		return nil, fmt.Errorf("Allocate answered %d containers, want %d", len(resp.ContainerResponses), len(requests))
	}
	var cdiNames [][]string
	for i, c := range resp.ContainerResponses {
		wantEnv := map[string]string{"GVIRTUS_VGPU_IDS": strings.Join(requests[i], ",")}
		if !reflect.DeepEqual(c.Envs, wantEnv) {
			return nil, fmt.Errorf("container %d envs %v, want %v", i, c.Envs, wantEnv)
		}
		if len(c.Mounts) != 0 || len(c.Devices) != 0 || len(c.Annotations) != 0 {
			return nil, fmt.Errorf("container %d has mounts %v, devices %v, annotations %v; want none",
				i, c.Mounts, c.Devices, c.Annotations)
		}
		var names []string
		for _, d := range c.CDIDevices {
			names = append(names, d.Name)
		}
		var wantNames []string
		if want.cdi {
			for _, id := range requests[i] {
				wantNames = append(wantNames, cdiName(id))
			}
		}
		if !reflect.DeepEqual(names, wantNames) {
			return nil, fmt.Errorf("container %d CDI devices %v, want %v", i, names, wantNames)
		}
		cdiNames = append(cdiNames, names)
	}
	return cdiNames, nil
}

// expectInvalidArgument checks that a call failed with INVALID_ARGUMENT and a message
// that names `mention`.
func expectInvalidArgument(what string, err error, mention string) error {
	if err == nil {
		return fmt.Errorf("%s: succeeded, want INVALID_ARGUMENT", what)
	}
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument {
		return fmt.Errorf("%s: code %v (%q), want INVALID_ARGUMENT", what, st.Code(), st.Message())
	}
	if !strings.Contains(st.Message(), mention) {
		return fmt.Errorf("%s: message %q does not mention %q", what, st.Message(), mention)
	}
	logf("%s rejected: %s", what, st.Message())
	return nil
}

func (p *pluginClient) checkAllocateErrors(want expectation) error {
	allocate := func(ids ...string) error {
		ctx, cancel := callContext()
		defer cancel()
		_, err := p.client.Allocate(ctx, &pluginapi.AllocateRequest{
			ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: ids}}})
		return err
	}
	if err := expectInvalidArgument("Allocate of an unknown ID", allocate("vgpu-0", "gpu-99"), "gpu-99"); err != nil {
		return err
	}
	tooMany := append(want.deviceIDs(), "vgpu-0")
	if err := expectInvalidArgument("Allocate of more devices than exist", allocate(tooMany...),
		fmt.Sprintf("%d", want.devices)); err != nil {
		return err
	}
	if err := expectInvalidArgument("Allocate of a repeated ID", allocate("vgpu-2", "vgpu-2"), "vgpu-2"); err != nil {
		return err
	}
	return expectInvalidArgument("Allocate of no device", allocate(), "no device")
}

func (p *pluginClient) checkPreferredAllocation() error {
	req := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"vgpu-3", "vgpu-0", "vgpu-2", "vgpu-1"}, MustIncludeDeviceIDs: []string{"vgpu-2"}, AllocationSize: 2},
		{AvailableDeviceIDs: []string{"vgpu-3", "vgpu-1"}, AllocationSize: 1},
	}}
	wantIDs := [][]string{{"vgpu-2", "vgpu-0"}, {"vgpu-1"}}
	ctx, cancel := callContext()
	defer cancel()
	resp, err := p.client.GetPreferredAllocation(ctx, req)
	if err != nil {
		return fmt.Errorf("GetPreferredAllocation: %w", err)
	}
	var got [][]string
	for _, c := range resp.ContainerResponses {
		got = append(got, c.DeviceIDs)
	}
	if !reflect.DeepEqual(got, wantIDs) {
		return fmt.Errorf("GetPreferredAllocation %v, want %v", got, wantIDs)
	}
	_, err = p.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
			{AvailableDeviceIDs: []string{"vgpu-0"}, AllocationSize: 2}}})
	return expectInvalidArgument("GetPreferredAllocation larger than the available set", err, "2")
}

func (p *pluginClient) checkPreStartContainer() error {
	ctx, cancel := callContext()
	defer cancel()
	if _, err := p.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIDs: []string{"vgpu-0"}}); err != nil {
		return fmt.Errorf("PreStartContainer: %w", err)
	}
	return nil
}
