# Rate rules whose requests may wait for their turn, one of each rate algorithm, for the
# delay property's tests.
policy "waits" {
  clock = "client"
  rule "gcra" {
    algorithm = "gcra"
    key       = request.user
    rate      = "10/s"
    burst     = 5
  }
  rule "tokens" {
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
}
