# One policy per built-in algorithm, small parameters so traces reach every branch.
policy "log" {
  rule "r" {
    algorithm = "sliding_log"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}

policy "window" {
  rule "r" {
    algorithm = "sliding_window"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}

policy "fixed" {
  rule "r" {
    algorithm = "fixed_window"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}

policy "bucket" {
  rule "r" {
    algorithm = "token_bucket"
    key       = "k"
    capacity  = 5
    rate      = "2/s"
    # An overridable rule's calls read the key's override in the same call: with none
    # set, every property holds as for the policy's figures.
    overridable = true
  }
}

policy "leaky" {
  rule "r" {
    algorithm = "leaky_bucket"
    key       = "k"
    capacity  = 5
    rate      = "3/2s"
  }
}

policy "gcra" {
  rule "r" {
    algorithm   = "gcra"
    key         = "k"
    rate        = "3/s"
    burst       = 4
    overridable = true
  }
}

policy "leases" {
  rule "r" {
    algorithm = "concurrency"
    key       = "k"
    max       = 3
    ttl       = "30s"
  }
}
