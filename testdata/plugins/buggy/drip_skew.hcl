algorithm "drip_skew" {
  source   = "drip_skew.lua"
  params   = { capacity = "count", rate = "rate" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "A leaky bucket as a meter whose clock never runs back, for client clocks."
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

policy "drip_meter" {
  clock = "client"
  rule "per_key" {
    algorithm = "drip_skew"
    key       = "k"
    capacity  = 4
    rate      = "2/s"
  }
}
