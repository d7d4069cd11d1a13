package main

import (
	"runtime/debug"
	"testing"
)

func TestGCPercentLeavesGOGCToTheUser(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	setGCPercent(func(string) string { return "" })
	if got := debug.SetGCPercent(123); got != gcPercent {
		t.Errorf("without GOGC, the collector's target is %d %%, want %d %%", got, gcPercent)
	}
	setGCPercent(func(k string) string { return map[string]string{"GOGC": "400"}[k] })
	if got := debug.SetGCPercent(100); got != 123 {
		t.Errorf("GOGC=400 set, and the CLI changed the collector's target to %d %%", got)
	}
}
