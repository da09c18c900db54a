package redisproc

import (
	"context"
	"fmt"
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
