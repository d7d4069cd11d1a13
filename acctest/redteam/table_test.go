package redteam

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// Outcomes of an attack.
const (
	refused   = "refused"   // a layer said no, with a reason
	contained = "contained" // it ran, and the slice held (or its process was stopped)
	escaped   = "ESCAPED"   // the test failed: the attack got more than the package
)

// row is one attack in the table.
type row struct {
	attack, layer, expected, outcome, detail string
}

// table collects the rows of every attack the run tried.
var table rows

type rows struct {
	mu   sync.Mutex
	rows []*row
}

// attack registers the running test as an attack that layer must stop
// with outcome expected; the row's outcome is set when the test ends:
// expected when it passed, escaped when it failed.
func attack(t *testing.T, layer, expected string) *row {
	t.Helper()
	// the subtest's name as written (go test turns its spaces into _)
	name := strings.ReplaceAll(t.Name()[strings.Index(t.Name(), "/")+1:], "_", " ")
	r := &row{attack: name, layer: layer, expected: expected}
	t.Cleanup(func() {
		switch {
		case t.Failed():
			r.outcome = escaped
		case t.Skipped():
			r.outcome = "skipped"
		default:
			r.outcome = expected
		}
		table.mu.Lock()
		table.rows = append(table.rows, r)
		table.mu.Unlock()
	})
	return r
}

// print writes the table, one line per attack, with what stopped it.
func (t *rows) print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nred team: %d attacks\n", len(t.rows))
	fmt.Fprintf(w, "%-60s  %-22s  %-9s  %-9s  %s\n", "ATTACK", "LAYER", "EXPECTED", "OUTCOME", "DETAIL")
	for _, r := range t.rows {
		d := strings.Join(strings.Fields(r.detail), " ")
		if len(d) > 160 {
			d = d[:157] + "..."
		}
		fmt.Fprintf(w, "%-60s  %-22s  %-9s  %-9s  %s\n", r.attack, r.layer, r.expected, r.outcome, d)
	}
}
