# A plugin whose check loops 3·10^8 times without a Redis command: a host that watches
# it (an instruction limit, a deadline) stops the call; one that does not returns,
# seconds later, and allows. engine's and verify's tests of how a plugin is run use it.
algorithm "spin" {
  source   = "spin.lua"
  params   = { limit = "count" }
  commands = ["GET"]
  guarantee "none" {}
}

policy "p" {
  rule "r" {
    algorithm = "spin"
    key       = "k"
    limit     = 3
  }
}
