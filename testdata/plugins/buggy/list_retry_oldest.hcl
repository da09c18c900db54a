algorithm "list_retry_oldest" {
  source   = "list_retry_oldest.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["LRANGE", "LPOP", "RPUSH", "PEXPIRE"]
  doc      = "A sliding log in a list of instants, oldest first."
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
  # check reads the whole list; commit pops what left the window and pushes the cost.
  work "list" {
    commands      = 4
    elements      = 2 * param.limit + cost.max
    entries       = param.limit
    element_bytes = 16
  }
}

policy "list_log" {
  rule "per_key" {
    algorithm = "list_retry_oldest"
    key       = "k"
    limit     = 5
    window    = "10s"
  }
}
