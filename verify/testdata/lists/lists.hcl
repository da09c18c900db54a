# One policy per built-in algorithm, each rule with an exempt and a deny list: the lists
# property on each.
policy "log" {
  rule "r" {
    exempt     = list("partners")
    deny       = list("banned")
    deny_retry = "7s"
    algorithm  = "sliding_log"
    key        = "k"
    limit      = 4
    window     = "10s"
  }
}

policy "window" {
  rule "r" {
    exempt     = list("partners")
    deny       = list("banned")
    deny_retry = "7s"
    algorithm  = "sliding_window"
    key        = "k"
    limit      = 4
    window     = "10s"
  }
}

policy "fixed" {
  rule "r" {
    exempt     = list("partners")
    deny       = list("banned")
    deny_retry = "7s"
    algorithm  = "fixed_window"
    key        = "k"
    limit      = 4
    window     = "10s"
  }
}

policy "bucket" {
  rule "r" {
    exempt     = list("partners")
    deny       = list("banned")
    deny_retry = "7s"
    algorithm  = "token_bucket"
    key        = "k"
    capacity   = 5
    rate       = "2/s"
  }
}

policy "leaky" {
  rule "r" {
    exempt     = list("partners")
    deny       = list("banned")
    deny_retry = "7s"
    algorithm  = "leaky_bucket"
    key        = "k"
    capacity   = 5
    rate       = "3/2s"
  }
}

policy "gcra" {
  rule "r" {
    exempt     = list("partners")
    deny       = list("banned")
    deny_retry = "7s"
    algorithm  = "gcra"
    key        = "k"
    rate       = "3/s"
    burst      = 4
  }
}

policy "leases" {
  rule "r" {
    exempt     = list("partners")
    deny       = list("banned")
    deny_retry = "7s"
    algorithm  = "concurrency"
    key        = "k"
    max        = 3
    ttl        = "30s"
  }
}
