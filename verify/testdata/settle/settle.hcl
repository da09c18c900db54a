# Rules whose requests settle their true cost after the fact, one of each algorithm that
# carries a debt, for the settle property's tests.
policy "tokens" {
  clock = "client"
  rule "gcra" {
    algorithm = "gcra"
    key       = request.user
    rate      = "10/s"
    burst     = 5
  }
  rule "bucket" {
    algorithm = "token_bucket"
    key       = request.user
    capacity  = 4
    rate      = "2/s"
  }
  rule "leaky" {
    algorithm = "leaky_bucket"
    key       = request.user
    capacity  = 3
    rate      = "1/250ms"
  }
  rule "window" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 6
    window    = "1s"
  }
  rule "daily" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 20
    window    = "calendar_day"
    time_zone = "America/New_York"
  }
}

# A shadow calendar rule is checked written out as its algorithm, each call carrying its
# periods.
policy "shadowed" {
  rule "monthly" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 50
    window    = "calendar_month"
    time_zone = "Asia/Kathmandu"
    shadow    = true
  }
}
