algorithm "upstash_sliding" {
  source   = "upstash_sliding.lua"
  params   = { tokens = "count", window = "duration" }
  commands = ["HMGET", "HINCRBY", "HSET", "DEL", "PEXPIRE"]
  doc      = "@upstash/ratelimit's slidingWindow: two fixed windows, the previous one weighted."

  # README: "Ratelimit.slidingWindow(10, "10 s")": "allows 10 requests per 10 seconds";
  # the doc comment: a "weighted score between two windows", "improved boundary behavior".
  guarantee "window" {
    amount = param.tokens
    window = param.window
    bound  = 2
    why    = "the estimate takes the previous window's count as spread evenly, so a burst at its end still lets nearly the limit through at the start of the next"
    precision {
      resolution = "1ms" # Date.now(): milliseconds
    }
  }

  # HMGET of two fields, then (a new window) DEL of two, HSET, HINCRBY and PEXPIRE.
  work "hash" {
    commands = 5
    elements = 6
    entries  = 2
  }
}

policy "upstash_sliding" {
  # Ratelimit.slidingWindow(5, "10 s")
  rule "per_key" {
    algorithm = "upstash_sliding"
    key       = "k"
    tokens    = 5
    window    = "10s"
  }
}
