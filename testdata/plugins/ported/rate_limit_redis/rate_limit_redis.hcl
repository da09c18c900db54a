algorithm "rate_limit_redis" {
  source   = "rate_limit_redis.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET", "PTTL", "SET", "INCRBY"]
  max_cost = 1 # express-rate-limit counts one hit a request
  doc      = "express-rate-limit on rate-limit-redis: a hit counter whose window starts at the first hit."

  # express-rate-limit's README: "limit: 100, // Limit each IP to 100 requests per `window`";
  # windowMs: "How long to remember requests for, in milliseconds". A window begins at a
  # key's first hit, so `limit` at the end of one window and `limit` at the start of the
  # next pass within moments.
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "a window starts at the first hit and ends windowMs later, so the limit spent at the end of one window may be spent again at the start of the next"
    precision {
      retry_after = "1s"  # the Retry-After header, whole seconds rounded up
      resolution  = "1ms" # the window's end is read back through PTTL, in milliseconds
    }
  }

  # PTTL, GET, then SET ... PX or INCRBY, on one integer.
  work "string" {
    commands      = 3
    elements      = 2
    entries       = 1
    element_bytes = 16
  }
}

policy "rate_limit_redis" {
  # rateLimit({ windowMs: 10 * 1000, limit: 5, store: new RedisStore({ sendCommand }) })
  rule "per_key" {
    algorithm = "rate_limit_redis"
    key       = "k"
    limit     = 5
    window    = "10s"
  }
}
