# A fixed window: 5 requests per aligned minute. verify reports its boundary burst.
policy "api" {
  rule "per_user" {
    algorithm = "fixed_window"
    when      = request.user != ""
    key       = request.user
    limit     = 5
    window    = "1m"
  }
}
