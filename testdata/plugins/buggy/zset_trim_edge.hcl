algorithm "zset_trim_edge" {
  source   = "zset_trim_edge.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZADD", "PEXPIRE"]
  doc      = "A sliding log in a sorted set, one member per unit of cost."
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
  # A member per unit of cost: cost.max ZADDs, and a trim of up to every member.
  work "zset" {
    commands = 5 + cost.max
    elements = 1 + param.limit + cost.max
    entries  = param.limit
  }
}

policy "zset_log" {
  rule "per_key" {
    algorithm = "zset_trim_edge"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}
