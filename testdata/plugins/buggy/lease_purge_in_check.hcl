algorithm "lease_purge_in_check" {
  source   = "lease_purge_in_check.lua"
  params   = { slots = "count", ttl = "duration", lease = "lease" }
  commands = ["ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZADD", "ZREM", "PEXPIRE"]
  doc      = "A pool of slots held under leases, released by refund or freed after ttl."
  guarantee "in_flight" {
    amount = param.slots
    ttl    = param.ttl
  }
  # A slot per unit of cost: cost.max ZADDs, and a trim of up to every slot.
  work "zset" {
    commands = 5 + cost.max
    elements = 1 + param.slots + 2 * cost.max
    entries  = param.slots
  }
}

policy "lease_pool" {
  rule "per_key" {
    algorithm = "lease_purge_in_check"
    key       = "k"
    slots     = 3
    ttl       = "30s"
  }
}
