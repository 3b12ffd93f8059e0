package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// The newest spec version that the CDI library of containerd 1.7.0 (v0.5.4) knows.
const wantCDIVersion = "0.5.0"

func deviceEnv(id string) string {
	return "GVIRTUS_VGPU_" + strings.TrimPrefix(id, "vgpu-") + "=" + id
}

func emptyExceptEnv(edits cdispec.ContainerEdits) bool {
	return len(edits.DeviceNodes) == 0 && len(edits.Mounts) == 0 && len(edits.Hooks) == 0 &&
		edits.IntelRdt == nil && len(edits.AdditionalGIDs) == 0
}

// checkCDISpec loads the folder with the upstream CDI cache, as containerd does, and
// resolves every advertised device.
func checkCDISpec(dir string, want expectation) (*cdi.Cache, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI cache: %w", err)
	}
	if errs := cache.GetErrors(); len(errs) != 0 {
		return nil, fmt.Errorf("CDI spec errors: %v", errs)
	}
	specs := cache.GetVendorSpecs("gvirtus.io")
	if len(specs) != 1 {
		return nil, fmt.Errorf("%d CDI specs of vendor gvirtus.io, want 1", len(specs))
	}
	spec := specs[0]
	if base := filepath.Base(spec.GetPath()); base != "gvirtus.io-vgpu.json" {
		return nil, fmt.Errorf("CDI spec file %q, want gvirtus.io-vgpu.json", base)
	}
	if spec.Version != wantCDIVersion || spec.Kind != "gvirtus.io/vgpu" || spec.GetClass() != "vgpu" {
		return nil, fmt.Errorf("CDI spec version %q kind %q, want %q gvirtus.io/vgpu",
			spec.Version, spec.Kind, wantCDIVersion)
	}
	if !emptyExceptEnv(spec.ContainerEdits) || len(spec.ContainerEdits.Env) != 0 {
		return nil, fmt.Errorf("CDI spec has global edits %+v, want none", spec.ContainerEdits)
	}
	var wantNames []string
	for _, id := range want.deviceIDs() {
		name := cdiName(id)
		wantNames = append(wantNames, name)
		device := cache.GetDevice(name)
		if device == nil {
			return nil, fmt.Errorf("CDI device %q does not resolve", name)
		}
		edits := device.ContainerEdits
		if !emptyExceptEnv(edits) || !reflect.DeepEqual(edits.Env, []string{deviceEnv(id)}) {
			return nil, fmt.Errorf("CDI device %q edits %+v, want env %q only", name, edits, deviceEnv(id))
		}
	}
	listed := cache.ListDevices()
	slices.Sort(listed)
	slices.Sort(wantNames)
	if !reflect.DeepEqual(listed, wantNames) {
		return nil, fmt.Errorf("CDI devices %v, want %v", listed, wantNames)
	}
	return cache, nil
}

// checkCDIInjection applies the devices that Allocate named to an OCI spec, as the
// container runtime does, and checks that only environment variables changed.
func checkCDIInjection(cache *cdi.Cache, names []string) error {
	spec := &oci.Spec{Process: &oci.Process{Env: []string{"PATH=/usr/bin"}}}
	if unresolved, err := cache.InjectDevices(spec, names...); err != nil {
		return fmt.Errorf("CDI injection of %v: %w (unresolved %v)", names, err, unresolved)
	}
	wantEnv := []string{"PATH=/usr/bin"}
	for _, name := range names {
		wantEnv = append(wantEnv, deviceEnv(strings.TrimPrefix(name, "gvirtus.io/vgpu=")))
	}
	slices.Sort(wantEnv)
	got := slices.Clone(spec.Process.Env)
	slices.Sort(got)
	if !reflect.DeepEqual(got, wantEnv) {
		return fmt.Errorf("CDI injection of %v gave env %v, want %v", names, got, wantEnv)
	}
	if len(spec.Mounts) != 0 || spec.Hooks != nil {
		return fmt.Errorf("CDI injection of %v added mounts %v or hooks %v", names, spec.Mounts, spec.Hooks)
	}
	if spec.Linux != nil && len(spec.Linux.Devices) != 0 {
		return fmt.Errorf("CDI injection of %v added device nodes %v", names, spec.Linux.Devices)
	}
	return nil
}
