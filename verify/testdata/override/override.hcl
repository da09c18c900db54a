# One policy per built-in algorithm, each rule overridable: the override property on each.
policy "log" {
  rule "r" {
    overridable = true
    algorithm   = "sliding_log"
    key         = "k"
    limit       = 4
    window      = "10s"
  }
}

policy "window" {
  rule "r" {
    overridable = true
    algorithm   = "sliding_window"
    key         = "k"
    limit       = 4
    window      = "10s"
  }
}

policy "fixed" {
  rule "r" {
    overridable = true
    algorithm   = "fixed_window"
    key         = "k"
    limit       = 4
    window      = "10s"
  }
}

policy "bucket" {
  rule "r" {
    overridable = true
    algorithm   = "token_bucket"
    key         = "k"
    capacity    = 5
    rate        = "2/s"
  }
}

policy "leaky" {
  rule "r" {
    overridable = true
    algorithm   = "leaky_bucket"
    key         = "k"
    capacity    = 5
    rate        = "3/2s"
  }
}

policy "gcra" {
  rule "r" {
    overridable = true
    # With lists too: its calls carry every flag of its compiled form.
    deny      = list("banned")
    algorithm = "gcra"
    key       = "k"
    rate      = "3/s"
    burst     = 4
  }
}

policy "leases" {
  rule "r" {
    overridable = true
    algorithm   = "concurrency"
    key         = "k"
    max         = 3
    ttl         = "30s"
  }
}
