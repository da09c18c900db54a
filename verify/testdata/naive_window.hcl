# The two-window estimate with the retry-after many published sliding-window scripts
# give: "the end of the current window". verify's retry-after property catches it.
algorithm "naive_window" {
  source   = "naive_window.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "sliding_window with retry-after = the end of the current window."
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "it estimates the previous window's traffic as spread evenly, as sliding_window does"
  }
}

policy "naive" {
  rule "per_user" {
    algorithm = "naive_window"
    when      = request.user != ""
    key       = request.user
    limit     = 4
    window    = "10s"
  }
}
