# The sliding log as applications write it without Lua: ZCOUNT to check, then ZADD to
# record. Inside the engine's one script call it is exact; verify's race at redis.call
# granularity shows what happens when the two run as separate commands.
algorithm "split_log" {
  source   = "split_log.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZADD", "PEXPIRE"]
  doc      = "A sliding log whose check is ZCOUNT and whose commit is ZADD."
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}

policy "split" {
  rule "per_user" {
    algorithm = "split_log"
    when      = request.user != ""
    key       = request.user
    limit     = 3
    window    = "10s"
  }
}
