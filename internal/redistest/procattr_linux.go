package redistest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procAttr has the kernel kill redis-server when the test binary dies, so a
// crashed or killed test run leaks no servers.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped returns once the process pid is in the stopped state (after SIGSTOP), or
// after a second: on Linux a signal is delivered when the kernel next schedules the
// process, so a Pause that returns has stopped the server, not merely asked it to stop.
func waitStopped(pid int) {
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return
		}
		// The state follows the command name, which is in parentheses and may hold spaces.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
	}
}
