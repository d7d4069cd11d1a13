package contract

import (
	"regexp"
	"testing"
)

// A DRA device name is a DNS label: the names of MIG devices must be one
// for every profile NVIDIA ships, or the ResourceSlice is refused.
func TestMIGDeviceNameIsADNSLabel(t *testing.T) {
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, c := range []struct {
		index     int
		profile   string
		placement int
		want      string
	}{
		{0, "1g.5gb", 3, "gpu-0-mig-1g-5gb-3"},
		{7, "1g.10gb+me", 0, "gpu-7-mig-1g-10gb-me-0"},
		{1, "7g.80gb", 0, "gpu-1-mig-7g-80gb-0"},
	} {
		got := MIGDeviceName(c.index, c.profile, c.placement)
		if got != c.want || !label.MatchString(got) || len(got) > 63 {
			t.Errorf("MIGDeviceName(%d, %q, %d) = %q, want %q (a DNS label)", c.index, c.profile, c.placement, got, c.want)
		}
	}
}

// Which releases read the checkpoint formats a node needs for its claims:
// a build before 0.1.0 (the previous release) and an image whose tag is
// no version read none after v2, 0.1.0 and later read them all.
func TestReleaseReadsCheckpoint(t *testing.T) {
	for _, c := range []struct {
		sharing, release string
		want             bool
	}{
		{SharingPartition, "0.0.1", true},
		{SharingPartition, "dev", true},
		{SharingAnySize, "0.1.0-29a6e70", false},
		{SharingTimeSliced, "0.0.9", false},
		{SharingMIG, "latest", false},
		{SharingMIG, "", false},
		{SharingAnySize, "0.1.0", true},
		{SharingMIG, "v0.1.0", true},
		{SharingTimeSliced, "1.4.2", true},
	} {
		if got := ReleaseReadsCheckpoint(c.release, CheckpointFormatFor(c.sharing)); got != c.want {
			t.Errorf("release %q reads the checkpoint of a %s claim (format %q): %v, want %v", c.release, c.sharing, CheckpointFormatFor(c.sharing), got, c.want)
		}
	}
}
