package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/kube"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// stackFlags are the flags every command reading a configuration shares.
type stackFlags struct {
	stack      string
	vars       []string
	varFiles   []string
	tables     []string
	tableSet   *tables.Set
	kubeconfig string
	context    string
	invNS      string
}

func (f *stackFlags) register(cmd *cobra.Command, cluster bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.stack, "stack", "", "stack name: what the inventory of applied objects is called (default: the directory's name)")
	fl.StringArrayVar(&f.vars, "var", nil, "set a variable: -var 'name=value' (repeatable)")
	fl.StringArrayVar(&f.varFiles, "var-file", nil, "read variables from a .tfvars file (repeatable)")
	fl.StringArrayVar(&f.tables, "table", nil, "a table file of your own extending the built-in GPU model, image, model and runtime tables (YAML, the format of schemas/tables; repeatable)")
	if cluster {
		fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
		fl.StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
		fl.StringVar(&f.invNS, "inventory-namespace", "gpuslice-system", "namespace holding stack inventories")
	}
}

func dirArg(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return "."
}

// load reads and validates the configuration, printing diagnostics; it
// fails when any is an error.
func (f *stackFlags) load(w io.Writer, dir string) (*hclstack.Config, error) {
	c, diags := f.loadDiags(dir)
	printDiags(w, diags)
	if diags.HasErrors() {
		return nil, errReported
	}
	return c, nil
}

// loadDiags reads the configuration in dir with the tables the flags name.
func (f *stackFlags) loadDiags(dir string) (*hclstack.Config, diag.Diagnostics) {
	set, err := tables.Load(f.tables...)
	if err != nil {
		return nil, diag.Diagnostics{{Severity: diag.Error, Summary: "Invalid -table", Detail: err.Error()}}
	}
	f.tableSet = set
	return hclstack.Load(dir, hclstack.Options{Stack: f.stack, VarOptions: hclstack.VarOptions{Vars: f.vars, VarFiles: f.varFiles}, GPUModels: set.GPUModels})
}

func (f *stackFlags) engine() (*engine.Engine, error) {
	cfg, err := kube.Load(f.kubeconfig, f.context)
	if err != nil {
		return nil, err
	}
	e, err := engine.New(cfg, f.invNS)
	if err != nil {
		return nil, err
	}
	e.Tables = f.tableSet
	return e, nil
}

// planStack plans the configuration and places the plan's diagnostics (ownership,
// plan-time checks) in the files.
func planStack(ctx context.Context, e *engine.Engine, c *hclstack.Config, opts plan.Options) (*plan.Plan, error) {
	p, err := e.Plan(ctx, c.Stack, opts)
	if err != nil {
		return nil, err
	}
	for i, d := range p.Diagnostics {
		p.Diagnostics[i] = c.Locate(d)
	}
	return p, nil
}

// errReported means the problem was already printed; main only sets the
// exit code.
var errReported = fmt.Errorf("errors were reported above")

func printDiags(w io.Writer, diags diag.Diagnostics) {
	for _, d := range diags {
		fmt.Fprintf(w, "%s: %s\n", d.Severity, d.Error())
	}
	if len(diags) > 0 {
		fmt.Fprintln(w)
	}
}

// confirm asks before changing the cluster unless -auto-approve was given;
// without a terminal to ask on, it refuses.
func confirm(cmd *cobra.Command, autoApprove bool, question string) (bool, error) {
	if autoApprove {
		return true, nil
	}
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return false, fmt.Errorf("no terminal to confirm on: rerun with -auto-approve")
	}
	fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n  Only 'yes' will be accepted.\n\n  Enter a value: ", question)
	var answer string
	_, _ = fmt.Fscanln(cmd.InOrStdin(), &answer)
	return strings.TrimSpace(answer) == "yes", nil
}
