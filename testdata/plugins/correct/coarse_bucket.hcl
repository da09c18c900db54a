algorithm "coarse_bucket" {
  source   = "coarse_bucket.lua"
  params   = { capacity = "count", rate = "rate" }
  commands = ["HMGET", "HSET", "EXPIRE"]
  doc      = "A token bucket answering in whole milliseconds and expiring in whole seconds."
  guarantee "rate" {
    burst = param.capacity
    rate  = param.rate
    precision {
      retry_after = "1ms"
      ttl         = "1s"
    }
  }
  work "hash" {
    commands = 3
    elements = 4
    entries  = 2
  }
}

policy "coarse_bucket" {
  rule "per_key" {
    algorithm = "coarse_bucket"
    key       = "k"
    capacity  = 5
    rate      = "3/2s"
  }
}
