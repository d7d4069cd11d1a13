package fastpath

import (
	"context"
	"fmt"
	"sync"

	"github.com/zclconf/go-cty/cty"
)

// A record is one request's answer from the provider's own work (Read or
// ModifyPlan), kept in the request's context: when the fast path has asked
// for it and then hands the request to the framework, or in check mode
// serves it through the framework too, the framework's resource gets the
// same answer instead of reading the cluster a second time. So check mode
// compares two answers made from one reading of the cluster, and fails at
// the first difference with nothing to retry.
type record struct {
	mu   sync.Mutex
	done bool
	in   cty.Value
	out  any
	// differs says how the framework's question differed from the fast
	// path's (check mode reports it).
	differs string
}

type recordKey struct{}

func withRecord(ctx context.Context) context.Context {
	return context.WithValue(ctx, recordKey{}, &record{})
}

// Once returns f's answer about in, computed once per request: the
// provider's framework resources and the Resource the fast path calls wrap
// their work in it. A second call with a different in (the framework asked
// about another value than the fast path did) computes its own answer, and
// check mode reports the difference.
func Once[T any](ctx context.Context, in cty.Value, f func() T) T {
	rec, _ := ctx.Value(recordKey{}).(*record)
	if rec == nil {
		return f()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.done {
		out := f()
		rec.done, rec.in, rec.out = true, in, out
		return out
	}
	out, ok := rec.out.(T)
	switch {
	case !ok:
		rec.differs = fmt.Sprintf("the framework asked for a %T, the fast path for a %T", out, rec.out)
	case !rec.in.RawEquals(in):
		rec.differs = fmt.Sprintf("the framework asked the provider about %#v, the fast path about %#v", in, rec.in)
	default:
		return out
	}
	return f()
}

// recordDiffers is what the request's record found different.
func recordDiffers(ctx context.Context) string {
	rec, _ := ctx.Value(recordKey{}).(*record)
	if rec == nil {
		return ""
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.differs
}
