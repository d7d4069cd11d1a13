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
