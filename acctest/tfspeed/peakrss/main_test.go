package main

import "testing"

func TestParseStatus(t *testing.T) {
	status := []byte("Name:\tgpuslice\nVmHWM:\t   91236 kB\nVmRSS:\t   90000 kB\nRssAnon:\t   49296 kB\nRssFile:\t   41940 kB\nRssShmem:\t       0 kB\n")
	got := parseStatus(status)
	if want := (resident{anon: 49296 << 10, file: 41940 << 10}); got != want {
		t.Errorf("parseStatus = %+v, want %+v", got, want)
	}
	if got := parseStatus([]byte("Name:\tzombie\nState:\tZ (zombie)\n")); got != (resident{}) {
		t.Errorf("a process without memory lines: %+v, want zeros", got)
	}
}
