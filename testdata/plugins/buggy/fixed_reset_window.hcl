algorithm "fixed_reset_window" {
  source   = "fixed_reset_window.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HGET", "HINCRBY", "DEL", "PEXPIRE"]
  doc      = "A fixed-window counter in a hash field named by the window."
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "a fixed window lets a client spend the limit at the end of one window and again at the start of the next"
  }
  # HGET, then DEL of the last window's field, HINCRBY and PEXPIRE.
  work "hash" {
    commands = 4
    elements = 3
    entries  = 1
  }
}

policy "hash_fixed" {
  rule "per_key" {
    algorithm = "fixed_reset_window"
    key       = "k"
    limit     = 4
    window    = "10s"
  }
}
