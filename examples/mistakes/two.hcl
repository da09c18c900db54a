algorithm "careless_window" {
  source   = "plugins/careless_window.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "a fixed window lets a burst straddle the window boundary"
  }
}

policy "careless" {
  rule "per_user" {
    algorithm = "careless_window"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}

policy "api" {
  rule "per_user" {
    algorithm = "fixed_window"
    key       = "k"
    limit     = 5
    window    = "1m"
  }
}
