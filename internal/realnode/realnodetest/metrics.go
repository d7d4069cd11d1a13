package realnodetest

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/realnode"
)

// Scrape reads the node plugin's /metrics on node n.
func Scrape(tb testing.TB, n *realnode.Node) string {
	tb.Helper()
	s, err := ReadMetrics(n)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// metricsClient gives up on a plugin that does not answer: a test must
// fail, not hang, when something blocks the plugin's collectors.
var metricsClient = &http.Client{Timeout: 30 * time.Second}

// ReadMetrics reads the node plugin's /metrics on node n.
func ReadMetrics(n *realnode.Node) (string, error) {
	resp, err := metricsClient.Get(fmt.Sprintf("http://%s:%d/metrics", n.IP, realnode.MetricsPort))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// ClaimMetric is the sum of a metric's series labelled with the claim's UID
// in a scrape (0 when it has none).
func ClaimMetric(scrape, name, claimUID string) float64 {
	re := regexp.MustCompile(`(?m)^` + name + `\{[^}]*claim_uid="` + regexp.QuoteMeta(claimUID) + `"[^}]*\} (\S+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(scrape, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

// MetricValue is the value of an unlabelled series in a scrape.
func MetricValue(scrape, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
