algorithm "bucket_slow_refill" {
  source   = "bucket_slow_refill.lua"
  params   = { capacity = "count", rate = "rate" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "A token bucket kept as the tokens it owes."
  guarantee "rate" {
    burst = param.capacity
    rate  = param.rate
  }
  work "hash" {
    commands = 3
    elements = 4
    entries  = 2
  }
}

policy "bucket" {
  rule "per_key" {
    algorithm = "bucket_slow_refill"
    key       = "k"
    capacity  = 5
    rate      = "3/2s"
  }
}
