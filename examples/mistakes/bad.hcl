policy "api" {
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "10/sec"
    brust     = 20
  }
}
