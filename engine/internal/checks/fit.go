package checks

import (
	"fmt"
	"strconv"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// defaultGPUOverheadMiB is a CUDA context's own device memory when the
// runtime table does not say (each context costs 300–500 MiB).
const defaultGPUOverheadMiB = 400

// fullWarnPercent is the share of the slice above which a model that fits
// still gets a warning: the runtime grows with batch size and long prompts.
const fullWarnPercent = 90

// setting is a value the workload runs with and where it came from.
type setting struct {
	value string
	attr  string // "" when it is the runtime's default
}

// fit: do the model's weights, its KV cache for the context and the
// runtime's overhead fit the slice, and is the context what the user meant?
func (c *checker) fit(w *spec.Workload, pkg *Package) {
	rt, isRuntime := c.runtimeOf(w)
	ctx, ok := c.context(w, rt, isRuntime)
	if !ok {
		return
	}
	kv := c.kvCacheType(w, rt, isRuntime)
	overhead := int64(defaultGPUOverheadMiB)
	who := "the CUDA context"
	if isRuntime && rt.GPUOverheadMiB > 0 {
		overhead, who = rt.GPUOverheadMiB, rt.Name
	}
	for _, m := range modelsOf(w) {
		llm, known := c.tables.LLMs[m.name]
		if !known {
			c.warnf(w, m.attr, "Model not known",
				"%q has no row in the model table (schemas/tables/llms.yaml), so whether it fits the slice was not checked; add it to a table file passed with -table", m.name)
			continue
		}
		if ctx.value == "" {
			continue // no context to check with
		}
		tokens, _ := strconv.ParseInt(ctx.value, 10, 64)
		if llm.MaxContext > 0 && tokens > llm.MaxContext {
			c.warnf(w, attrOr(ctx.attr, m.attr), "Context longer than the model's",
				"%d tokens is more than %s was trained for (%d); the runtime caps or degrades beyond it", tokens, llm.Name, llm.MaxContext)
		}
		if pkg == nil || pkg.MemoryBytes <= 0 {
			continue
		}
		weights, cache := llm.WeightsMiB<<20, llm.KVCacheBytes(tokens, kv)
		need := weights + cache + overhead<<20
		breakdown := fmt.Sprintf("weights %s + KV cache %s (%d tokens, %s) + %s's overhead %s",
			gib(weights), gib(cache), tokens, kv, who, gib(overhead<<20))
		switch {
		case need > pkg.MemoryBytes:
			c.errorf(w, attrOr(ctx.attr, m.attr), "Model does not fit the slice",
				"%s needs about %s of GPU memory — %s — and a %s slice has %s. %s",
				llm.Name, gib(need), breakdown, pkg.Name, gib(pkg.MemoryBytes), fitAdvice(llm, pkg.MemoryBytes, weights+overhead<<20, kv))
		case need*100 > pkg.MemoryBytes*fullWarnPercent:
			c.warnf(w, attrOr(ctx.attr, m.attr), "Model nearly fills the slice",
				"%s needs about %s of the %s slice's %s (%d%%) — %s; long prompts or batching may run out of memory",
				llm.Name, gib(need), pkg.Name, gib(pkg.MemoryBytes), need*100/pkg.MemoryBytes, breakdown)
		}
	}
}

// context finds the context window the workload runs with. ok is false when
// nothing is known about it (no model, no runtime).
func (c *checker) context(w *spec.Workload, rt tables.Runtime, isRuntime bool) (setting, bool) {
	declared := int64(0)
	if w.Model != nil {
		declared = w.Model.ContextLength
	}
	if isRuntime && rt.ContextEnv != "" {
		envAttr := fmt.Sprintf("container.env[%q]", rt.ContextEnv)
		if v, set := w.Container.Env[rt.ContextEnv]; set {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				c.errorf(w, envAttr, "Invalid context length", "%s = %q: write a number of tokens such as \"16384\"", rt.ContextEnv, v)
				return setting{}, false
			}
			if declared > 0 && declared != n {
				c.warnf(w, "model.context_length", "Two context lengths",
					"model.context_length is %d but %s is %d; %s uses %s, so set both to the same value", declared, rt.ContextEnv, n, rt.Name, rt.ContextEnv)
			}
			return setting{v, envAttr}, true
		}
		if declared > 0 {
			c.warnf(w, "model.context_length", "Context length not passed to "+rt.Name,
				"%s reads its context from %s, which is not set, so it runs with %d tokens, not %d: add %s = \"%d\" to container.env",
				rt.Name, rt.ContextEnv, rt.DefaultContext, declared, rt.ContextEnv, declared)
			return setting{strconv.FormatInt(declared, 10), "model.context_length"}, true
		}
		if rt.DefaultContext > 0 {
			c.warnf(w, "container.env", "Context left at the runtime default",
				"%s is not set, so %s uses %d tokens and silently truncates longer prompts (agent system prompts with tool definitions reach ~15,000 tokens). Set %s in container.env, e.g. \"16384\", after checking it fits the slice",
				rt.ContextEnv, rt.Name, rt.DefaultContext, rt.ContextEnv)
			return setting{strconv.FormatInt(rt.DefaultContext, 10), ""}, true
		}
	}
	if declared > 0 {
		return setting{strconv.FormatInt(declared, 10), "model.context_length"}, true
	}
	return setting{}, w.Model != nil
}

func (c *checker) kvCacheType(w *spec.Workload, rt tables.Runtime, isRuntime bool) string {
	if isRuntime && rt.KVCacheEnv != "" {
		if v := w.Container.Env[rt.KVCacheEnv]; v != "" {
			if _, ok := tables.KVCacheBytesPerElement[v]; ok {
				return v
			}
		}
	}
	if w.Model != nil && w.Model.KVCacheType != "" {
		return w.Model.KVCacheType
	}
	if isRuntime && rt.DefaultKVCache != "" {
		return rt.DefaultKVCache
	}
	return "f16"
}

type namedModel struct{ name, attr string }

// modelsOf are the models a workload serves: the model block, else the ones
// it preloads.
func modelsOf(w *spec.Workload) []namedModel {
	if w.Model != nil {
		return []namedModel{{w.Model.Name, "model.name"}}
	}
	var out []namedModel
	for i, m := range w.PreloadModels {
		out = append(out, namedModel{m, fmt.Sprintf("preload_models[%d]", i)})
	}
	return out
}

// fitAdvice says how long a context fits, with the cache as it is and
// quantised.
func fitAdvice(llm tables.LLM, slice, fixed int64, kv string) string {
	if fixed >= slice {
		return "The weights alone do not fit: use a bigger package or a smaller model."
	}
	fits := func(kv string) int64 { return (slice - fixed) / llm.KVCacheBytes(1, kv) / 1024 * 1024 }
	advice := fmt.Sprintf("At most about %d tokens fit with a %s KV cache", fits(kv), kv)
	if kv == "f16" || kv == "f32" {
		advice += fmt.Sprintf(" (%d with q8_0)", fits("q8_0"))
	}
	return advice + "; lower the context, quantise the KV cache, or use a bigger package."
}

func attrOr(attr, fallback string) string {
	if attr != "" {
		return attr
	}
	return fallback
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
