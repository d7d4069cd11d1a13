package checks

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// memory: the container's RAM is separate from the slice. A runtime loads
// models through host memory first, and below its floor the container is
// OOMKilled before the model reaches the GPU. (A request above the limit is
// refused by validation.)
func (c *checker) memory(w *spec.Workload) {
	rt, ok := c.runtimeOf(w)
	if !ok || rt.MemoryFloor == "" || w.Container.MemoryLimit == "" {
		return
	}
	limit, err := resource.ParseQuantity(w.Container.MemoryLimit)
	if err != nil {
		return // reported by validation
	}
	if floor := resource.MustParse(rt.MemoryFloor); limit.Cmp(floor) < 0 {
		c.warnf(w, "container.memory_limit", "Container RAM limit too low for "+rt.Name,
			"memory_limit %s is below the %s %s needs on the host side while it loads a model: the container is OOMKilled (exit code 137) and restarts in a loop. Known good: memory_request = %q, memory_limit = %q",
			w.Container.MemoryLimit, rt.MemoryFloor, rt.Name, rt.MemoryRequest, rt.MemoryLimit)
	}
}
