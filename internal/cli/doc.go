// Package cli is what rlctl's commands print and decide once their files are loaded and
// their flags parsed, for every front end that must give the same output for the same
// files: the rlctl command (cmd/rlctl) and the browser playground (playground). Flags,
// files on disk, terminals and exit codes stay in cmd/rlctl.
//
// The text is rlctl's: diagnostics as "file:line:col: severity: summary" followed by the
// source and how to fix it ([WriteDiagnostics]), "rlctl: error: …" and "rlctl: hint: …"
// lines ([WriteError]), validate's summary line ([Summary]), the choice of scenarios to
// simulate ([Scenarios]) and verify's verdict ([Verdict]).
package cli
