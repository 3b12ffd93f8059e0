// kubelet-standin drives gvirtus-device-plugin end to end the way the kubelet does,
// with the kubelet's own generated API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1):
// it serves Registration on kubelet.sock, receives the plugin's registration, calls every
// DevicePlugin method and checks every field, resolves the CDI spec with the upstream
// CDI library, restarts three ways and times the re-registration, and stops the plugin
// with SIGTERM. It exits 0 when every check passed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// The contract allows a few seconds; the test holds the plugin to this.
const reRegistrationLimit = 5 * time.Second

func logf(format string, args ...any) {
	fmt.Printf("[kubelet-standin] "+format+"\n", args...)
}

// leaveStaleSocket leaves a socket file that nothing listens on, as a crashed plugin does.
func leaveStaleSocket(path string) error {
	listener, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	listener.SetUnlinkOnClose(false)
	return listener.Close()
}

type scenario struct {
	pluginPath string
	dir        string
	kubeletDir string
	cdiDir     string
	want       expectation
	plugin     *exec.Cmd
	exited     chan error
	kubelet    *fakeKubelet
}

func (s *scenario) startPlugin() error {
	args := []string{
		"--kubelet-dir", s.kubeletDir,
		"--resource", s.want.resource,
		"--devices", fmt.Sprint(s.want.devices),
		"--socket-name", s.want.socketName,
		"--cdi-dir", s.cdiDir,
		"--health-addr", "",
		"--log-level", "debug",
	}
	s.plugin = exec.Command(s.pluginPath, args...)
	s.plugin.Stdout = os.Stdout
	s.plugin.Stderr = os.Stdout
	if err := s.plugin.Start(); err != nil {
		return err
	}
	s.exited = make(chan error, 1)
	go func() { s.exited <- s.plugin.Wait() }()
	return nil
}

// awaitServing waits until the plugin answers on its socket, without a kubelet.
func (s *scenario) awaitServing() error {
	deadline := time.Now().Add(reRegistrationLimit)
	for {
		client, err := dialPlugin(s.kubeletDir, s.want.socketName)
		if err == nil {
			err = client.checkOptions()
			client.close()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("plugin does not serve on its socket: %w", err)
		}
		select {
		case err := <-s.exited:
			return fmt.Errorf("plugin exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitRegistration waits for the plugin to register, checks the request, and returns
// how long it took since the kubelet started serving.
func (s *scenario) awaitRegistration(what string) (time.Duration, error) {
	request, took, err := s.kubelet.awaitRegistration(reRegistrationLimit)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := checkRegistration(request, s.want); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	logf("%s: registered after %d ms", what, took.Milliseconds())
	return took, nil
}

// checkPlugin runs every DevicePlugin method against the plugin's socket.
func (s *scenario) checkPlugin(full bool) error {
	client, err := dialPlugin(s.kubeletDir, s.want.socketName)
	if err != nil {
		return err
	}
	defer client.close()
	if err := client.checkOptions(); err != nil {
		return err
	}
	stream, cancel, err := client.checkListAndWatch(s.want)
	if err != nil {
		return err
	}
	defer cancel()
	if !full {
		return nil
	}
	cache, err := checkCDISpec(s.cdiDir, s.want)
	if err != nil {
		return err
	}
	allocated, err := client.checkAllocate(s.want)
	if err != nil {
		return err
	}
	for _, names := range allocated {
		if err := checkCDIInjection(cache, names); err != nil {
			return err
		}
	}
	if err := client.checkAllocateErrors(s.want); err != nil {
		return err
	}
	if err := client.checkPreferredAllocation(); err != nil {
		return err
	}
	if err := client.checkPreStartContainer(); err != nil {
		return err
	}
	// The stream stays open, with nothing new to say, until the plugin restarts.
	received := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		received <- err
	}()
	select {
	case err := <-received:
		return fmt.Errorf("ListAndWatch sent or ended without a change: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	return nil
}

func (s *scenario) run() error {
	ourSocket := filepath.Join(s.kubeletDir, s.want.socketName)
	if err := leaveStaleSocket(ourSocket); err != nil {
		return err
	}
	// The plugin starts before the kubelet: it serves, and waits for kubelet.sock.
	if err := s.startPlugin(); err != nil {
		return err
	}
	if err := s.awaitServing(); err != nil {
		return fmt.Errorf("stale socket at start: %w", err)
	}
	var err error
	if s.kubelet, err = serveKubelet(s.kubeletDir); err != nil {
		return err
	}
	if _, err := s.awaitRegistration("first registration"); err != nil {
		return err
	}
	if err := s.checkPlugin(true); err != nil {
		return err
	}
	if err := s.kubelet.expectNoRegistration(time.Second); err != nil {
		return err
	}

	// 1. kubelet restarts: it deletes every socket in the folder, then serves again.
	s.kubelet.stop()
	if s.kubelet, err = startKubelet(s.kubeletDir); err != nil {
		return err
	}
	restart, err := s.awaitRegistration("kubelet restart")
	if err != nil {
		return err
	}
	if err := s.checkPlugin(false); err != nil {
		return fmt.Errorf("after kubelet restart: %w", err)
	}
	if err := s.kubelet.expectNoRegistration(500 * time.Millisecond); err != nil {
		return fmt.Errorf("after kubelet restart: %w", err)
	}

	// 2. only our socket goes away.
	if err := os.Remove(ourSocket); err != nil {
		return err
	}
	s.kubelet.started = time.Now()
	deleted, err := s.awaitRegistration("plugin socket deleted")
	if err != nil {
		return err
	}
	if err := s.checkPlugin(false); err != nil {
		return fmt.Errorf("after socket deletion: %w", err)
	}
	if err := s.kubelet.expectNoRegistration(500 * time.Millisecond); err != nil {
		return fmt.Errorf("after socket deletion: %w", err)
	}

	// 3. only kubelet.sock is recreated; our socket stays.
	s.kubelet.stop()
	if s.kubelet, err = serveKubelet(s.kubeletDir); err != nil {
		return err
	}
	recreated, err := s.awaitRegistration("kubelet.sock recreated")
	if err != nil {
		return err
	}
	if err := s.checkPlugin(false); err != nil {
		return fmt.Errorf("after kubelet.sock recreated: %w", err)
	}
	if err := s.kubelet.expectNoRegistration(500 * time.Millisecond); err != nil {
		return fmt.Errorf("after kubelet.sock recreated: %w", err)
	}

	// SIGTERM: exit 0 and remove our socket, leave the kubelet's.
	if err := s.plugin.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-s.exited:
		if err != nil {
			return fmt.Errorf("plugin after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(reRegistrationLimit):
		return errors.New("plugin still running 5s after SIGTERM")
	}
	s.plugin = nil
	if _, err := os.Stat(ourSocket); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("plugin socket still there after SIGTERM (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(s.kubeletDir, "kubelet.sock")); err != nil {
		return fmt.Errorf("kubelet.sock gone after the plugin stopped: %v", err)
	}
	s.kubelet.stop()

	logf("re-registration time: kubelet restart %d ms, plugin socket deleted %d ms, "+
		"kubelet.sock recreated %d ms (limit %s)", restart.Milliseconds(), deleted.Milliseconds(),
		recreated.Milliseconds(), reRegistrationLimit)
	return nil
}

func (s *scenario) cleanup() {
	if s.plugin != nil && s.plugin.Process != nil {
		_ = s.plugin.Process.Kill()
		<-s.exited
	}
	if s.kubelet != nil {
		s.kubelet.stop()
	}
}

func main() {
	pluginPath := flag.String("plugin", "", "path to the gvirtus-device-plugin binary")
	devices := flag.Int("devices", 4, "number of virtual GPUs the plugin is asked for (at least 4)")
	keep := flag.Bool("keep", false, "keep the temporary folder")
	flag.Parse()
	if *pluginPath == "" || *devices < 4 {
		fmt.Fprintln(os.Stderr, "usage: kubelet-standin -plugin PATH [-devices N>=4] [-keep]")
		os.Exit(2)
	}
	// Short paths: a unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "dp-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := &scenario{
		pluginPath: *pluginPath,
		dir:        dir,
		kubeletDir: filepath.Join(dir, "device-plugins"),
		cdiDir:     filepath.Join(dir, "etc", "cdi"),
		want: expectation{resource: "nvidia.com/gpu", socketName: "gvirtus-vgpu.sock",
			devices: *devices, cdi: true},
	}
	if err := os.MkdirAll(s.kubeletDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = s.run()
	s.cleanup()
	if !*keep {
		_ = os.RemoveAll(dir)
	}
	if err != nil {
		logf("FAIL: %v", err)
		os.Exit(1)
	}
	logf("PASS")
}
