package checks

import (
	"github.com/hashicorp/go-version"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// image: does the container image still run on the package's GPU
// generation? An image table row that excludes the GPU is an error; an
// unpinned tag or an image the table does not cover is a warning.
func (c *checker) image(w *spec.Workload, pkg *Package) {
	ref := parseImage(w.Container.Image)
	if pkg == nil {
		return // an unknown package is reported by validation
	}
	ccText := c.computeCapability(pkg.GPUModel)
	cc, err := version.NewVersion(ccText)
	if err != nil {
		c.warnf(w, "container.image", "GPU generation unknown",
			"the compute capability of %q is not known (no ResourceSlice publishes it and schemas/tables/gpu-models.yaml has no row), so %s was not checked against it; add the GPU to a table file passed with -table",
			pkg.GPUModel, w.Container.Image)
		return
	}
	gpu := pkg.GPUModel + " (compute capability " + ccText + ")"
	if !ref.pinned() {
		c.warnf(w, "container.image", "Unpinned image",
			"%s names no version: each pull may bring a release that no longer runs on %s. Pin a version known to run there (e.g. ollama/ollama:0.24.0) and test upgrades knowingly",
			w.Container.Image, gpu)
		return
	}
	row, known := c.tables.Images[ref.Repository]
	if !known {
		c.warnf(w, "container.image", "Image not known to run on this GPU",
			"gpuslice has no compatibility row for %s (schemas/tables/images.yaml); test it on a %s before relying on it, and add a row in a table file passed with -table",
			ref.Repository, gpu)
		return
	}
	v, rule, ok := row.Match(ref.Tag)
	switch {
	case !ok && v == nil:
		c.warnf(w, "container.image", "Image version unknown",
			"the tag %q of %s carries no version the image table can read, so it was not checked against %s; pin a versioned tag",
			ref.Tag, ref.Repository, gpu)
	case !ok:
		c.warnf(w, "container.image", "Image not known to run on this GPU",
			"no row of the image table covers %s %s; test it on a %s before relying on it", ref.Repository, v, gpu)
	case !rule.RunsOn(cc):
		c.errorf(w, "container.image", "Image does not run on this GPU",
			"%s %s needs compute capability %s or newer, and package %q is a %s: %s",
			ref.Repository, v, rule.MinComputeCapability, pkg.Name, gpu, rule.Note)
	}
}
