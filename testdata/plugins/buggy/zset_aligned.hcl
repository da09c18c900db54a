algorithm "zset_aligned" {
  source   = "zset_aligned.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZADD", "PEXPIRE"]
  doc      = "A sliding log in a sorted set, one member per unit of cost."
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}

policy "zset_log" {
  rule "per_key" {
    algorithm = "zset_aligned"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}
