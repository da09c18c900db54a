algorithm "two_window" {
  source   = "two_window.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "The sliding-window estimate over the current and previous aligned windows."
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "the estimate takes the previous window's cost as spread evenly, so a burst at its end still lets nearly the limit through at the start of the next"
  }
  work "hash" {
    commands = 3
    elements = 6
    entries  = 3
  }
}

policy "two_window" {
  rule "per_key" {
    algorithm = "two_window"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}
