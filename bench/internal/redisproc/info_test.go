package redisproc

import "testing"

func TestCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_fcall:calls=10,usec=120,usec_per_call=12.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_fcall_ro:calls=100,usec=1000,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n"
	calls, usec := CommandStats(info, "fcall", "evalsha", "eval")
	if calls != 12 || usec != 150 {
		t.Errorf("CommandStats = %v calls, %v µs, want 12, 150", calls, usec)
	}
	if calls, usec := CommandStats(info); calls != 0 || usec != 0 {
		t.Errorf("CommandStats with no names = %v, %v", calls, usec)
	}
}
