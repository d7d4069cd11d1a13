package checks

import (
	"path"
	"strings"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// storage: a workload that downloads models keeps them in the container's
// filesystem unless it has a volume, so every restart (even one caused by
// changing an environment variable) downloads them again.
func (c *checker) storage(w *spec.Workload) {
	rt, isRuntime := c.runtimeOf(w)
	if !isRuntime && len(w.PreloadModels) == 0 && w.Model == nil {
		return
	}
	modelsPath := ""
	if isRuntime {
		modelsPath = rt.ModelsPath
		if p := w.Container.Env[rt.ModelsEnv]; rt.ModelsEnv != "" && p != "" {
			modelsPath = p
		}
	}
	if w.ModelVolume == nil {
		suggestion := modelsPath
		if suggestion == "" {
			suggestion = "<where the runtime keeps models>"
		}
		c.warnf(w, "model_volume", "Models are not kept",
			"this workload serves models but has no model_volume: every pod restart, even one caused by an env change, deletes the downloaded models and pulls them again. Add model_volume { size = \"20Gi\", mount_path = %q }", suggestion)
		return
	}
	if modelsPath != "" && !within(modelsPath, w.ModelVolume.MountPath) {
		c.warnf(w, "model_volume.mount_path", "Volume not where the models are",
			"%s keeps its models in %s, so a volume mounted at %s does not keep them; set mount_path = %q", rt.Name, modelsPath, w.ModelVolume.MountPath, modelsPath)
	}
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
