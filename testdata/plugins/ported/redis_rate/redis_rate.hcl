algorithm "redis_rate" {
  source   = "redis_rate.lua"
  params   = { rate = "rate", burst = "count" }
  commands = ["GET", "SET"]
  doc      = "go-redis/redis_rate's GCRA (AllowN), floats of seconds and all."

  # README: "implements GCRA (aka leaky bucket) for rate limiting based on Redis";
  # Limit{Rate, Burst, Period}: Burst at once, then Rate per Period.
  guarantee "rate" {
    burst = param.burst
    rate  = param.rate
    precision {
      # Upstream keeps time as a double of seconds since 2017 (an ulp of about 6e-8 s) and
      # answers through %.14g and Go's ns Durations, which the contract's whole µs round up:
      # its clock is good to a microsecond, a tick either way.
      resolution = "1us"
      ttl        = "1s" # SET ... EX ceil(reset_after): whole seconds, upstream's choice
    }
  }

  # A GET, then a SET (with EX) of one double.
  work "string" {
    commands      = 2
    elements      = 2
    entries       = 1
    element_bytes = 24
  }
}

policy "redis_rate" {
  # redis_rate.PerSecond(5): Rate 5, Period 1s, Burst 5.
  rule "per_key" {
    algorithm = "redis_rate"
    key       = "k"
    rate      = "5/s"
    burst     = 5
  }
}
