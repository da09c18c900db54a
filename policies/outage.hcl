# Redis outages: what each on_error mode does while Redis fails, and after.
#
# Two endpoints meet an outage with different failure modes:
#   - search keeps limiting in process (on_error = "local"): a scraper stays limited while
#     Redis is stalled, and people keep searching;
#   - checkout refuses what it cannot check (on_error = "deny"): shoppers are refused while
#     Redis is down and served again within the breaker's cooldown once it is back.
#
# The engine waits at most its deadline for Redis; after 5 failures in a row its circuit
# breaker stops asking for a second, so few requests pay the deadline.

policy "search" {
  match = request.path == "/search"

  # If Redis fails, run the same script in process. Its counters start empty, so a client
  # gets one fresh allowance per instance, then is held to the limit again (local_share
  # divides the limit among the instances instead: see fleet.hcl).
  on_error = "local"

  # 100 searches in any minute per address, counted exactly.
  rule "per_ip" {
    algorithm = "sliding_log"
    when      = request.ip != ""
    key       = request.ip
    limit     = 100
    window    = "1m"
  }
}

policy "checkout" {
  match = request.path == "/checkout"

  # If Redis fails, refuse: an order must never skip its limit.
  on_error = "deny"

  # 5 orders at once per user, then one every 10 seconds.
  rule "per_user" {
    algorithm = "gcra"
    when      = request.user != ""
    key       = request.user
    rate      = "1/10s"
    burst     = 5
  }
}

scenario "search_stall" {
  policy   = "search"
  duration = "5m"

  # Redis stops answering for 30 seconds: a call waits for the deadline, and the server
  # runs it when it wakes up, long after the caller gave up.
  fault {
    kind = "stall"
    at   = "2m"
    for  = "30s"
  }

  # The engine as deployed: these are its defaults.
  engine {
    deadline         = "50ms"
    breaker_failures = 5
    breaker_cooldown = "1s"
  }

  # One address scraping 10 pages a second.
  traffic "scraper" {
    request = {
      ip   = "203.0.113.9"
      path = "/search"
    }
    rate = "10/s"
  }

  # People searching now and then.
  traffic "users" {
    clients = 200
    request = {
      ip   = "198.51.100.${client}"
      path = "/search"
    }
    rate    = "1/10s"
    pattern = "poisson"
  }

  expect {
    scraper_limited_in_stall = allowed_during_fault("scraper") <= 100
    limited_in_process       = decided_by("scraper", "local") > 0
    users_served_in_stall    = denied_during_fault("users") == 0
    few_wait_for_deadline    = breaker_open("users") > 10 * timed_out("users")
    no_phantom_charges       = phantom_charges() == 0
  }
}

scenario "checkout_restart" {
  policy   = "checkout"
  duration = "3m"

  # Redis restarts without persistence: down for 20 seconds, back with no keys.
  fault {
    kind = "restart"
    at   = "1m"
    for  = "20s"
  }

  traffic "shoppers" {
    clients = 100
    request = {
      path = "/checkout"
      user = "u${client}"
    }
    rate = "1/20s"
  }

  expect {
    refused_while_down   = allowed_during_fault("shoppers") == 0
    back_within_cooldown = recovered_within("shoppers", "1s")
    served_otherwise     = denied("shoppers") - denied_during_fault("shoppers") <= 5
  }
}
