# A fixed window whose peek forgets that a key may not exist yet: a peek at a fresh key
# is arithmetic on nil, a Lua runtime error. verify's errors property finds the request
# that raises it and names the plugin's file and line.
algorithm "careless_window" {
  source   = "careless_window.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "fixed_window with a peek that fails on a fresh key."
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "a fixed window lets a burst straddle the window boundary"
  }
}

policy "careless" {
  rule "per_user" {
    algorithm = "careless_window"
    when      = request.user != ""
    key       = request.user
    limit     = 4
    window    = "10s"
  }
}
