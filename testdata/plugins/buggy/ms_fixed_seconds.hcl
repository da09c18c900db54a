algorithm "ms_fixed_seconds" {
  source   = "ms_fixed_seconds.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "A fixed-window counter on a millisecond clock."
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "a fixed window lets a client spend the limit at the end of one window and again at the start of the next"
    precision {
      resolution = "1ms"
    }
  }
  work "hash" {
    commands = 3
    elements = 4
    entries  = 2
  }
}

policy "ms_fixed" {
  rule "per_key" {
    algorithm = "ms_fixed_seconds"
    key       = "k"
    limit     = 3
    window    = "1500ms"
  }
}
