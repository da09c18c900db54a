package redistest

import "syscall"

// procAttr has the kernel kill redis-server when the test binary dies, so a
// crashed or killed test run leaks no servers.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
