package redistest

import (
	"fmt"
	"strconv"
	"strings"
)

// CommandCalls reads the calls of each command from the text of INFO commandstats (as
// since the last CONFIG RESETSTAT): command name ("get", "config|resetstat") to calls. A
// command the server has not run is absent; a cmdstat line it cannot read is an error.
func CommandCalls(info string) (map[string]int64, error) {
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		stat, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, rest, ok := strings.Cut(stat, ":calls=")
		n, err := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("redistest: INFO commandstats line %q: no calls count", line)
		}
		calls[name] = n
	}
	return calls, nil
}
