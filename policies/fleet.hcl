# A fleet during an outage: three instances of the service behind a load balancer share
# one Redis, which goes down for a minute. With on_error = "local" each instance then
# decides alone, in process, from empty counters; local_share says how many may do so at
# once, and each keeps that share of every limit, so the fleet together admits at most
# the limit while Redis is away (plus what Redis admitted just before it went).

policy "lookup" {
  match = request.path == "/lookup"

  # If Redis fails, decide in process, with a third of each limit on each of the 3
  # instances that may fall back at once: 90 a minute becomes 30 per instance.
  on_error    = "local"
  local_share = 3

  # 90 lookups in any minute per address, counted exactly.
  rule "per_ip" {
    algorithm = "sliding_log"
    when      = request.ip != ""
    key       = request.ip
    limit     = 90
    window    = "1m"
  }
}

scenario "lookup_outage" {
  policy   = "lookup"
  duration = "5m"

  # Redis refuses connections for a minute, one window of the rule.
  fault {
    kind = "refuse"
    at   = "2m"
    for  = "1m"
  }

  # Three instances, requests going to them in turn.
  engine {
    instances = 3
  }

  # One address scraping 10 lookups a second, spread over the instances.
  traffic "scraper" {
    request = {
      ip   = "203.0.113.9"
      path = "/lookup"
    }
    rate = "10/s"
  }

  # People looking something up now and then.
  traffic "users" {
    clients = 100
    request = {
      ip   = "198.51.100.${client}"
      path = "/lookup"
    }
    rate    = "1/30s"
    pattern = "poisson"
  }

  expect {
    fleet_keeps_the_limit  = allowed_during_fault("scraper") <= 90
    limited_in_process     = decided_by("scraper", "local") > 0
    at_most_twice_around   = max_allowed_in("scraper", "1m") <= 2 * 90
    users_served_in_outage = denied_during_fault("users") == 0
  }
}
