# Per-customer overrides: one tenant pays for ten times the default.
#
# The policy gives every tenant 10 requests a second with a burst of 20. A rule with
# overridable = true takes other figures for one key at runtime (rlctl override set, the
# service's POST /v1/overrides/set, Engine.SetOverride), read in the same atomic script call
# that decides the key: every instance sees a change at its next decision, and no decision
# sees half of one. What the key used counts against the new figures.

policy "api" {
  rule "per_tenant" {
    algorithm   = "gcra"
    key         = request.tenant
    when        = request.tenant != ""
    rate        = "10/s"
    burst       = 20
    overridable = true
  }
}

scenario "upgrade" {
  policy   = "api"
  duration = "4m"

  # acme sends 50 a second from the start; at 1m it is upgraded to 100 a second for two
  # minutes (a trial), after which the policy's figures apply again.
  traffic "acme" {
    request = { tenant = "acme" }
    rate    = "50/s"
  }

  # Other tenants stay within the default.
  traffic "others" {
    clients = 20
    request = { tenant = "t${client}" }
    rate    = "5/s"
  }

  override {
    at      = "1m"
    rule    = "per_tenant"
    request = { tenant = "acme" }
    set     = { rate = "100/s", burst = 200 }
    for     = "2m"
  }

  expect {
    # 10/s for the first and last minute, 50/s (all it sends) during the trial:
    # 600 + 6000 + 600, plus the bursts.
    trial_served  = allowed("acme") >= 7200 && allowed("acme") <= 7300
    others_served = denied("others") == 0
  }
}
