algorithm "gcra_nil_tat" {
  source   = "gcra_nil_tat.lua"
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
    algorithm = "gcra_nil_tat"
    key       = "k"
    rate      = "2/s"
    burst     = 4
  }
}
