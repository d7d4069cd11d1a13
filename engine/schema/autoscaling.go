package schema

import "github.com/zclconf/go-cty/cty"

// autoscaling is the workload's autoscaling block, named after the fields of
// an autoscaling/v2 HorizontalPodAutoscaler.
var autoscaling = Block{
	Name: "autoscaling", Nesting: NestingSingle,
	Description: "Scale the replicas with load: a HorizontalPodAutoscaler (autoscaling/v2) on CPU or memory utilization and custom or external metrics. It owns the replica count once set: apply never resets it. Each replica takes a slice: plan warns when `max_replicas` exceeds the namespace's grant and refuses a `min_replicas` that does not fit. Deployments and statefulsets only.",
	Attributes: []Attribute{
		{Name: "min_replicas", Type: cty.Number, Default: cty.NumberIntVal(1), Description: "Fewest replicas the autoscaler keeps."},
		{Name: "max_replicas", Type: cty.Number, Required: true, Description: "Most replicas the autoscaler starts; each needs a slice of the package."},
		{Name: "cpu_utilization", Type: cty.Number, Description: "Target average CPU utilization, in percent of `container.cpu_request` (which must be set), e.g. `70`."},
		{Name: "memory_utilization", Type: cty.Number, Description: "Target average memory utilization, in percent of `container.memory_request` (which must be set)."},
	},
	Blocks: []Block{{
		Name: "metric", Nesting: NestingList,
		Description: "A custom or external metric, as a Prometheus adapter or KEDA's metrics server serves it.",
		Attributes: []Attribute{
			required(oneOf(str("type", "`Pods` (a per-pod metric, averaged), `Object` (one object's metric, e.g. an Ingress's requests per second) or `External` (from outside the cluster, e.g. a queue's latency)."), "Pods", "Object", "External")),
			required(str("name", "Metric name as the metrics API serves it, e.g. `queue_latency_seconds`.")),
			{Name: "selector", Type: cty.Map(cty.String), Description: "Labels that narrow the metric's series (`metric.selector.matchLabels`)."},
			str("target_value", "Target total value (Object and External), a quantity such as `500m`."),
			str("target_average_value", "Target value per pod (any type), a quantity such as `2`."),
		},
		Blocks: []Block{{
			Name: "described_object", Nesting: NestingSingle,
			Description: "The object an `Object` metric belongs to.",
			Attributes: []Attribute{
				required(str("api_version", "Its API version, e.g. `v1` or `networking.k8s.io/v1`.")),
				required(str("kind", "Its kind, e.g. `Service`.")),
				required(str("name", "Its name, in the workload's namespace.")),
			},
		}},
	}},
}
