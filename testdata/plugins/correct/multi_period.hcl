algorithm "multi_period" {
  source   = "multi_period.lua"
  params   = { per_minute = "count", per_month = "count" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "Fixed windows of a minute and of a 30-day month, kept at once in one hash."
  guarantee "window" {
    amount = param.per_minute
    window = "1m"
    bound  = 2
    why    = "a fixed minute lets its limit through at the end of one minute and again at the start of the next"
  }
  guarantee "window" {
    amount = param.per_month
    window = "30d"
    bound  = 2
    why    = "a fixed month lets its limit through at the end of one month and again at the start of the next"
  }
  work "hash" {
    commands = 3
    elements = 8
    entries  = 4
  }
}

policy "multi_period" {
  rule "per_key" {
    algorithm  = "multi_period"
    key        = "k"
    per_minute = 3
    per_month  = 6
  }
}
