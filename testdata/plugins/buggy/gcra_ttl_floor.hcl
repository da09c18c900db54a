algorithm "gcra_ttl_floor" {
  source   = "gcra_ttl_floor.lua"
  params   = { rate = "rate", burst = "count" }
  commands = ["GET", "SET"]
  doc      = "GCRA with one integer TAT set with PX."
  guarantee "rate" {
    burst = param.burst
    rate  = param.rate
  }
  work "string" {
    commands      = 2
    elements      = 2
    entries       = 1
    element_bytes = 16
  }
}

policy "tat_gcra" {
  rule "per_key" {
    algorithm = "gcra_ttl_floor"
    key       = "k"
    rate      = "2/s"
    burst     = 4
  }
}
