algorithm "ms_log" {
  source   = "ms_log.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZADD", "PEXPIRE"]
  doc      = "A sliding log on a millisecond clock, in a sorted set, one member per unit of cost."
  guarantee "window" {
    amount = param.limit
    window = param.window
    precision {
      resolution = "1ms"
    }
  }
  # A member per unit of cost: cost.max ZADDs, and a trim of up to every member.
  work "zset" {
    commands = 5 + cost.max
    elements = 1 + param.limit + cost.max
    entries  = param.limit
  }
}

policy "ms_log" {
  rule "per_key" {
    algorithm = "ms_log"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}
