policy "login" {
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "5/m"
    burst     = 3
    block_for = "15m"
    block_max = "4h"
  }
  rule "per_ip" {
    algorithm = "sliding_window"
    when      = request.ip != ""
    key       = request.ip
    limit     = 20
    window    = "1m"
    block_for = "10s"
  }
}
