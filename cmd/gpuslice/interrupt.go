package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interrupts is what Ctrl-C (SIGINT) and SIGTERM do to a writing command,
// as in Terraform: the first stops it gracefully (ctx ends: no new write
// starts, the writes in flight finish, the inventory records what was done,
// the lock is released); the second exits at once, leaving the lock to
// expire.
type interrupts struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sigs   chan os.Signal
	mu     sync.Mutex
	// before runs instead of a graceful stop while nothing is being
	// written (planning, the confirmation): it cleans up and exits.
	before func()
}

func newInterrupts(parent context.Context, stderr io.Writer, name string) *interrupts {
	ctx, cancel := context.WithCancelCause(parent)
	in := &interrupts{ctx: ctx, cancel: cancel, sigs: make(chan os.Signal, 2)}
	signal.Notify(in.sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		first := true
		for sig := range in.sigs {
			if !first {
				fmt.Fprintf(stderr, "\nTwo interrupts received. Exiting immediately. The state lock (if held) is taken over by the next writer after 15 s unrenewed; run plan to see what was applied.\n")
				os.Exit(1)
			}
			first = false
			in.mu.Lock()
			before := in.before
			in.mu.Unlock()
			if before != nil {
				fmt.Fprintf(stderr, "\nInterrupted (%s) before anything was changed.\n", sig)
				before()
				os.Exit(1)
			}
			fmt.Fprintf(stderr, "\nInterrupt received (%s).\nPlease wait for %s to exit or data loss may occur.\nGracefully shutting down...\n", sig, name)
			cancel(fmt.Errorf("interrupted by %s", sig))
		}
	}()
	return in
}

// beforeWriting sets what an interrupt does while nothing is written yet;
// nil makes interrupts graceful stops again.
func (in *interrupts) beforeWriting(f func()) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.before = f
}

func (in *interrupts) stop() { signal.Stop(in.sigs); close(in.sigs) }
