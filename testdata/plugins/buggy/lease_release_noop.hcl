algorithm "lease_release_noop" {
  source   = "lease_release_noop.lua"
  params   = { slots = "count", ttl = "duration", lease = "lease" }
  commands = ["ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZADD", "ZREM", "PEXPIRE"]
  doc      = "A pool of slots held under leases, released by refund or freed after ttl."
  guarantee "in_flight" {
    amount = param.slots
    ttl    = param.ttl
  }
}

policy "lease_pool" {
  rule "per_key" {
    algorithm = "lease_release_noop"
    key       = "k"
    slots     = 3
    ttl       = "30s"
  }
}
