# Limits that change while serving: a tenant that pays for ten times the default, a penalty
# box for addresses that flood, and a list of banned addresses.
#
# Every tenant gets 10 requests a second with a burst of 20. A rule with overridable = true
# takes other figures for one key at runtime (rlctl override set, the service's
# POST /v1/overrides/set, Engine.SetOverride); a rule with deny = list("...") refuses the
# keys on that list (rlctl list add, POST /v1/lists/add, Engine.AddToList). Both are read
# in the same atomic script call that decides the key: every instance sees a change at its
# next decision, and no decision sees half of one. What a key used counts against its new
# figures.

policy "api" {
  rule "per_tenant" {
    algorithm   = "gcra"
    key         = request.tenant
    when        = request.tenant != ""
    rate        = "10/s"
    burst       = 20
    overridable = true
  }

  # An address past 20 a second is shut out for a minute; one on banned_ips, for good
  # (told to come back in an hour).
  rule "per_ip" {
    algorithm  = "gcra"
    key        = request.ip
    when       = request.ip != ""
    rate       = "20/s"
    burst      = 20
    block_for  = "1m"
    deny       = list("banned_ips")
    deny_retry = "1h"
  }
}

scenario "upgrade" {
  policy   = "api"
  duration = "4m"

  # acme sends 50 a second from ten addresses; at 1m it is upgraded to 100 a second for
  # two minutes (a trial), after which the policy's figures apply again.
  traffic "acme" {
    clients = 10
    request = { tenant = "acme", ip = "198.51.100.${client}" }
    rate    = "5/s"
  }

  # Other tenants stay within the default.
  traffic "others" {
    clients = 20
    request = { tenant = "t${client}", ip = "192.0.2.${client}" }
    rate    = "5/s"
  }

  # One address, no tenant, floods at 40 a second: the penalty box holds it to a burst a
  # minute, and at 2m it is banned.
  traffic "flood" {
    request = { ip = "203.0.113.9" }
    rate    = "40/s"
  }

  override {
    at      = "1m"
    rule    = "per_tenant"
    request = { tenant = "acme" }
    set     = { rate = "100/s", burst = 200 }
    for     = "2m"
  }

  list {
    at      = "2m"
    add     = "banned_ips"
    request = { ip = "203.0.113.9" }
  }

  expect {
    # 10/s for the first and last minute, 50/s (all it sends) during the trial:
    # 600 + 6000 + 600, plus the bursts.
    trial_served  = allowed("acme") >= 7200 && allowed("acme") <= 7300
    others_served = denied("others") == 0
    # A burst (20, and what the rate earns in a second) when each block ends, twice in
    # two minutes; once banned, nothing.
    flood_held = allowed("flood") <= 80
  }
}
