# Tiered public API.
#
# Anonymous clients are limited per IP address, signed-in users per user, and each
# tenant as a whole by the plan it pays for. The three rules are checked in one atomic
# call: a request passes only if every rule that applies to it allows it, and a denied
# request is charged to none of them.

locals {
  # Requests per minute a whole tenant may make, by plan. Unknown plans get the free tier.
  tenant_rpm = {
    free       = 1000
    pro        = 10000
    enterprise = 100000
  }

  # How many requests one user may send at once before the steady 10/s applies.
  user_burst = {
    free       = 20
    pro        = 100
    enterprise = 500
  }
}

policy "public_api" {
  # Only the versioned API, and only requests we can attribute to an address.
  match = startswith(request.path, "/v1/") && request.ip != ""

  # If Redis is unreachable, keep limiting in-process rather than fail open.
  on_error = "local"

  # Anonymous clients: 60 requests in any sliding minute per address.
  rule "anonymous_per_ip" {
    algorithm = "sliding_window"
    when      = request.user == ""
    key       = request.ip
    limit     = 60
    window    = "1m"

    # sliding_window's estimate lets up to 2× limit through in a minute when traffic
    # bunches at the end of one; accepted, so verify -strict fails only beyond that.
    accept_bound = true
  }

  # Signed-in users: a steady 10 per second, with a burst allowance that grows with the plan.
  rule "per_user" {
    algorithm = "gcra"
    when      = request.user != ""
    key       = request.user
    rate      = "10/s"
    burst     = lookup(local.user_burst, request.plan, 20)
  }

  # Whole tenants: the plan's requests per minute, shared by all of the tenant's users.
  rule "per_tenant" {
    algorithm = "sliding_window"
    when      = request.tenant != ""
    key       = request.tenant
    limit     = lookup(local.tenant_rpm, request.plan, 1000)
    window    = "1m"

    # sliding_window's estimate lets up to 2× limit through in a minute when traffic
    # bunches at the end of one; accepted, so verify -strict fails only beyond that.
    accept_bound = true
  }
}

# An anonymous scraper hammers the API from one address while the tenant's users carry on.
scenario "anonymous_scraper" {
  policy   = "public_api"
  duration = "10m"

  traffic "scraper" {
    request = { ip = "203.0.113.7", path = "/v1/items" }
    rate    = "5/s"
  }

  traffic "users" {
    clients = 200
    request = {
      ip     = "198.51.100.${client % 256}"
      path   = "/v1/items"
      user   = "u${client}"
      tenant = "acme"
      plan   = "pro"
    }
    rate    = "2/m"
    pattern = "poisson"
  }

  expect {
    # 60 of the scraper's 300 requests a minute get through.
    scraper_held_to_60_per_minute = max_allowed_in("scraper", "1m") <= 60
    scraper_mostly_denied         = denied_fraction("scraper") > 0.75
    users_unaffected              = denied_fraction("users") < 0.01
  }
}
