//go:build unix

package redistest

import "syscall"

// The signals Pause and Resume send.
var sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT
