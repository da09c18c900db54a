# A fixed window whose retry-after adds a jitter from math.random: verify finds it
# unsound, and what it finds depends on the random draws.
algorithm "jitter_window" {
  source   = "jitter_window.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "fixed_window with a randomly late retry-after."
  work "hash" {
    commands = 3
    elements = 4
    entries  = 2
  }
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "a fixed window lets a burst straddle the window boundary"
  }
}

policy "jitter" {
  rule "per_user" {
    algorithm = "jitter_window"
    key       = "u"
    limit     = 4
    window    = "10s"
  }
  rule "per_ip" {
    algorithm = "fixed_window"
    key       = "ip"
    limit     = 6
    window    = "10s"
  }
}
