//go:build !unix

package redistest

import "os"

// Without SIGSTOP and SIGCONT, os.Process.Signal rejects these and Pause fails the test.
var sigStop, sigCont os.Signal = unsupported{}, unsupported{}

type unsupported struct{}

func (unsupported) String() string { return "SIGSTOP/SIGCONT (not on this system)" }
func (unsupported) Signal()        {}
