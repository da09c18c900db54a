package engine

import (
	"log/slog"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/rlctl/rlctl/dsl"
)

// Load loads the policies at paths (files or directories, as dsl.Load), compiles them and
// returns an engine deciding them on backend: the start of a program that embeds rlctl.
// When the policies do not load, the error is a *PolicyError, which states every problem
// at its file:line:col; warnings go to the engine's logger (WithLogger; slog.Default()
// without it), one record each.
func Load(backend Backend, paths []string, opts ...Option) (*Engine, error) {
	cfg, diags := dsl.Load(paths...)
	if diags.HasErrors() {
		return nil, &PolicyError{Diagnostics: diags, files: cfgFiles(cfg)}
	}
	plan, err := Compile(cfg)
	if err != nil {
		return nil, err
	}
	e := New(backend, plan, opts...)
	log := e.log
	if !e.logSet {
		log = slog.Default()
	}
	for _, d := range diags {
		log.Warn("rlctl: policy warning", "diagnostic", render(hcl.Diagnostics{d}, cfgFiles(cfg)))
	}
	return e, nil
}

// PolicyError is policies that do not load: every diagnostic, errors and warnings.
type PolicyError struct {
	Diagnostics hcl.Diagnostics
	files       map[string]*hcl.File
}

// Error renders every diagnostic as rlctl validate does, each with its file:line:col, the
// source line and what to do.
func (e *PolicyError) Error() string {
	return "rlctl: the policies do not load:\n" + render(e.Diagnostics, e.files)
}

func render(diags hcl.Diagnostics, files map[string]*hcl.File) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(dsl.DiagnosticText(files, d, 0, false))
	}
	return strings.TrimRight(b.String(), "\n")
}

func cfgFiles(cfg *dsl.Config) map[string]*hcl.File {
	if cfg == nil {
		return nil
	}
	return cfg.Files
}
