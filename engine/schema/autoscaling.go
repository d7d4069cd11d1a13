package schema

import "github.com/zclconf/go-cty/cty"

// autoscaling is the workload's autoscaling block, named after the fields of
// an autoscaling/v2 HorizontalPodAutoscaler.
var autoscaling = Block{
	Name: "autoscaling", Nesting: NestingSingle,
	Description: "Scale the replicas with load: a HorizontalPodAutoscaler (autoscaling/v2) on CPU or memory utilization and custom or external metrics. It owns the replica count once set: apply never resets it. Each replica takes a slice: plan warns when `max_replicas` exceeds the namespace's grant and refuses a `min_replicas` that does not fit. Deployments and statefulsets only. With a `keda` block, a KEDA ScaledObject instead.",
	Attributes: []Attribute{
		{Name: "min_replicas", Type: cty.Number, Default: cty.NumberIntVal(1), Description: "Fewest replicas the autoscaler keeps."},
		{Name: "max_replicas", Type: cty.Number, Required: true, Description: "Most replicas the autoscaler starts; each needs a slice of the package."},
		{Name: "cpu_utilization", Type: cty.Number, Description: "Target average CPU utilization, in percent of `container.cpu_request` (which must be set), e.g. `70`."},
		{Name: "memory_utilization", Type: cty.Number, Description: "Target average memory utilization, in percent of `container.memory_request` (which must be set)."},
	},
	Blocks: []Block{keda, {
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

// keda makes the autoscaler a KEDA ScaledObject, named after its fields.
var keda = Block{
	Name: "keda", Nesting: NestingSingle,
	Description: "Scale with KEDA instead: a ScaledObject (keda.sh/v1alpha1) with a Prometheus trigger, plus `cpu_utilization` and `memory_utilization` as KEDA's cpu and memory triggers (`metric` blocks are HPA metrics and are refused here). KEDA must be installed: plan fails without its ScaledObject CRD.",
	Attributes: []Attribute{
		{Name: "polling_interval", Type: cty.Number, Description: "Seconds between KEDA's checks of the trigger (KEDA's default: 30)."},
		{Name: "cooldown_period", Type: cty.Number, Description: "Seconds after the last active trigger before scaling to min_replicas (KEDA's default: 300)."},
	},
	Blocks: []Block{{
		Name: "prometheus", Nesting: NestingSingle,
		Description: "A Prometheus query KEDA scales on, e.g. the request queue's latency (required in a keda block).",
		Attributes: []Attribute{
			required(str("server_address", "Prometheus' address, e.g. `http://prometheus.monitoring.svc:9090`.")),
			required(str("query", "PromQL returning one value, e.g. `histogram_quantile(0.95, sum(rate(queue_latency_seconds_bucket[2m])) by (le))`.")),
			required(str("threshold", "Target value of the query per replica, e.g. `0.5`.")),
			str("activation_threshold", "Value above which KEDA activates the scaler at all (KEDA's default: 0)."),
		},
	}},
}
