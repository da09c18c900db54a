//go:build !linux

package redistest

import "syscall"

// procAttr is empty off Linux: there is no parent-death signal, and Main and
// the test cleanups are the only things that stop servers.
func procAttr() *syscall.SysProcAttr { return nil }

// waitStopped does nothing off Linux: a Pause returns once SIGSTOP is sent.
func waitStopped(int) {}
