package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registration is one Register call as the fake kubelet received it.
type registration struct {
	request  *pluginapi.RegisterRequest
	received time.Time
}

// fakeKubelet serves the kubelet's Registration service on <dir>/kubelet.sock, the way
// the kubelet's device manager does, and hands every request to the test.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir           string
	server        *grpc.Server
	registrations chan registration
	started       time.Time
}

// startKubelet clears the folder as the real kubelet does when it starts (it removes
// every socket in it, its own and the plugins'), then serves kubelet.sock.
func startKubelet(dir string) (*fakeKubelet, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, entry := range entries {
		if entry.Type()&os.ModeSocket != 0 {
			if err := os.Remove(filepath.Join(dir, entry.Name())); err != nil {
				return nil, err
			}
		}
	}
	return serveKubelet(dir)
}

// serveKubelet serves kubelet.sock without touching the rest of the folder.
func serveKubelet(dir string) (*fakeKubelet, error) {
	socket := filepath.Join(dir, "kubelet.sock")
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	k := &fakeKubelet{
		dir:           dir,
		server:        grpc.NewServer(),
		registrations: make(chan registration, 16),
		started:       time.Now(),
	}
	pluginapi.RegisterRegistrationServer(k.server, k)
	go func() { _ = k.server.Serve(listener) }()
	return k, nil
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.registrations <- registration{request: r, received: time.Now()}
	return &pluginapi.Empty{}, nil
}

// stop ends the server; the socket file goes with it.
func (k *fakeKubelet) stop() {
	k.server.Stop()
	_ = os.Remove(filepath.Join(k.dir, "kubelet.sock"))
}

// awaitRegistration waits for the next Register call and returns it with the time it
// took since the kubelet started serving.
func (k *fakeKubelet) awaitRegistration(limit time.Duration) (*pluginapi.RegisterRequest, time.Duration, error) {
	select {
	case r := <-k.registrations:
		return r.request, r.received.Sub(k.started), nil
	case <-time.After(limit):
		return nil, 0, fmt.Errorf("no registration within %s", limit)
	}
}

// expectNoRegistration fails when a Register call arrives within `quiet`.
func (k *fakeKubelet) expectNoRegistration(quiet time.Duration) error {
	select {
	case r := <-k.registrations:
		return fmt.Errorf("unexpected registration %v", r.request)
	case <-time.After(quiet):
		return nil
	}
}
