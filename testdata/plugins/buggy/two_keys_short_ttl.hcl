algorithm "two_keys_short_ttl" {
  source   = "two_keys_short_ttl.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "RENAME", "PEXPIRE"]
  keys     = ["cur", "prev"]
  doc      = "The sliding-window estimate over two aligned windows, a key per window."
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "the estimate takes the previous window's cost as spread evenly, so a burst at its end still lets nearly the limit through at the start of the next"
  }
  work "hash" {
    commands = 5
    elements = 8
    entries  = 2
  }
}

policy "two_keys" {
  rule "per_key" {
    algorithm = "two_keys_short_ttl"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}
