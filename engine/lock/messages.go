package lock

import (
	"fmt"
	"io"
	"time"
)

// Waiting is an Options.Waiting telling w whom a writer of stack waits
// for, up to timeout, as Terraform says it.
func Waiting(w io.Writer, stack string, timeout time.Duration) func(Info, bool) {
	return func(h Info, abandoned bool) {
		if abandoned {
			fmt.Fprintf(w, "Acquiring state lock. This may take a few moments... (stack %s is locked by %s (%s), who last renewed it at %s by its clock and looks gone: "+
				"taking the lock over unless it is renewed within %s)\n", stack, h.Who, h.Operation, h.Renewed.Local().Format(time.RFC3339), h.Duration)
			return
		}
		fmt.Fprintf(w, "Acquiring state lock. This may take a few moments... (stack %s is locked by %s (%s) since %s; waiting up to %s)\n",
			stack, h.Who, h.Operation, h.Created.Local().Format(time.RFC3339), timeout)
	}
}

// WarnTookOver tells w when l was taken over from a writer that stopped
// renewing it.
func WarnTookOver(w io.Writer, l *Lock) {
	if t := l.TookOver; t != nil {
		fmt.Fprintf(w, "Warning: took over the state lock of stack %s from %s (%s), which was not renewed for %s (its last renewal: %s by its clock): that writer was killed or lost the cluster; run plan to see what it left.\n",
			l.Stack(), t.Who, t.Operation, t.Duration, t.Renewed.Local().Format(time.RFC3339))
	}
}
