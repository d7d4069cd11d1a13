package engine_test

import (
	"sort"
	"testing"

	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
)

// Every computed attribute of a workload is filled in by someone: known at
// plan (spec.Resource.PlannedAttributes) or learned from the cluster
// (status.Status.Attributes), never both.
func TestWorkloadComputedAttributesCovered(t *testing.T) {
	w := &spec.Workload{Namespace: "a", Name: "b", Expose: &spec.Expose{Port: 80}}
	filled := map[string]string{}
	for name := range w.PlannedAttributes() {
		filled[name] = "PlannedAttributes"
	}
	for name := range (status.Status{}).Attributes() {
		if by, twice := filled[name]; twice {
			t.Errorf("%s is filled by both %s and Status.Attributes", name, by)
		}
		filled[name] = "Status.Attributes"
	}
	var computed []string
	for _, a := range schema.Workload.Attributes {
		if a.Computed {
			computed = append(computed, a.Name)
			if filled[a.Name] == "" {
				t.Errorf("computed attribute %s is filled by nothing", a.Name)
			}
		}
	}
	if len(computed) != len(filled) {
		names := make([]string, 0, len(filled))
		for n := range filled {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("filled %v, but the schema's computed attributes are %v", names, computed)
	}
}
