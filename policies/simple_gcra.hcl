# A plugin algorithm and a policy that uses it.
#
# simple_gcra is GCRA written as a plugin, its state one integer in a string key; its Lua
# is plugins/simple_gcra.lua. docs/plugins.md walks through writing, verifying and
# deploying it.

algorithm "simple_gcra" {
  source   = "plugins/simple_gcra.lua"
  params   = { rate = "rate", burst = "count" }
  commands = ["GET", "SET", "DEL", "PEXPIRE"]
  doc      = "GCRA on one string key: the theoretical arrival time, in µs."

  # At most burst at once, then rate: what verify holds every rule using it to.
  guarantee "rate" {
    burst = param.burst
    rate  = param.rate
  }

  # Its worst case on Redis: a GET, then a SET and a PEXPIRE (a refund: a GET and a DEL, or
  # a SET and a PEXPIRE), on one string of at most 16 digits.
  work "string" {
    commands      = 3
    elements      = 2
    entries       = 1
    element_bytes = 16
  }
}

policy "exports" {
  match = startswith(request.path, "/v1/export") && request.user != ""

  # Exports are heavy: 3 at once per user, then one every 10 seconds.
  rule "per_user" {
    algorithm = "simple_gcra"
    key       = request.user
    rate      = "6/m"
    burst     = 3
  }
}

scenario "export_loop" {
  policy   = "exports"
  duration = "5m"

  # A script exporting every second.
  traffic "script" {
    request = { path = "/v1/export", user = "robot" }
    rate    = "1/s"
  }

  # People exporting now and then.
  traffic "people" {
    clients = 20
    request = { path = "/v1/export", user = "u${client}" }
    rate    = "1/2m"
    pattern = "poisson"
  }

  expect {
    script_held_to_rate = max_allowed_in("script", "1m") <= 3 + 6
    people_unaffected   = denied("people") == 0
  }
}
