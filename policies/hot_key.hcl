# Hot keys served from quota leases: each tenant's quota is one key, which one Redis
# primary counts for every instance of the service, and a few tenants send most of the
# traffic. With lease_size, each instance takes up to 250 units of a tenant's key at once
# (charged in Redis as they are taken), spends them without a call, and gives back what
# is left when its hold ends: Redis sees a call per slice, not per request.
#
# What it promises, which `rlctl verify` checks with several instances on one simulated
# Redis: a tenant's quota is never exceeded, and an instance is denied only while each
# other holds at most 250 units of it. The scenario shows the calls saved.

policy "ingest" {
  match = request.tenant != ""

  # 15,000 events a minute per tenant, across the fleet: a quota per calendar-aligned
  # minute, so twice that across a minute's boundary is accepted by design.
  rule "per_tenant" {
    algorithm    = "fixed_window"
    key          = request.tenant
    limit        = 15000
    window       = "1m"
    accept_bound = true
    lease_size   = 250
    lease_for    = "10s"
  }
}

scenario "busy_tenants" {
  policy   = "ingest"
  duration = "2m"

  # Eight instances of the service behind a load balancer, requests going to them in turn.
  engine {
    instances = 8
  }

  # A large tenant within its quota: 12,000 a minute.
  traffic "acme" {
    request = { tenant = "acme" }
    rate    = "200/s"
  }

  # A tenant sending half again its quota: held to 15,000 a minute.
  traffic "globex" {
    request = { tenant = "globex" }
    rate    = "400/s"
  }

  # Twenty small tenants, one event a second each.
  traffic "small" {
    request = { tenant = "t${client}" }
    clients = 20
    rate    = "1/s"
  }

  expect {
    # Within its quota, acme is never refused, whatever globex does.
    acme_served = denied_fraction("acme") == 0
    # globex gets its quota in each minute (twice that across a window's boundary:
    # fixed_window's bound), and no more.
    globex_held  = max_allowed_in("globex", "1m") <= 30000
    small_served = denied_fraction("small") == 0
  }
}
