package redisproc

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CPU returns a server's used_cpu_user + used_cpu_sys (INFO cpu), in seconds.
func CPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := InfoField(info, f)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// InfoField returns the numeric field name of an INFO reply.
func InfoField(info, name string) (float64, error) {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("INFO has no %s", name)
}

// CommandStats returns the sums of the calls and usec fields over the cmdstat_<name>
// lines of an INFO commandstats reply whose <name> is exactly one of names (so "fcall"
// does not count cmdstat_fcall_ro). A name absent from the reply adds nothing, as does a
// field that does not parse; with no names, or none present, both sums are 0.
func CommandStats(info string, names ...string) (calls, usec float64) {
	for line := range strings.SplitSeq(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, rest, ok := strings.Cut(rest, ":")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += x
			case "usec":
				usec += x
			}
		}
	}
	return calls, usec
}
