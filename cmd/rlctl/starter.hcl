# A starter rate-limit policy, written by rlctl init: one policy with two rules, and a
# scenario that shows them at work. Change the figures to fit your service, then check it
# again (FILE is this file's name):
#
#   rlctl validate FILE         every problem, with how to fix it
#   rlctl simulate -check FILE  run the scenario below; fail if an expectation does not hold
#   rlctl verify FILE           prove each rule's limit on adversarial traffic
#
# rlctl help policy and rlctl help scenario summarize the language; docs/policies.md, in
# rlctl's source, is the reference of every block, attribute and function.

policy "api" {
  # The requests this policy limits: those to /api/. Without match, every request.
  match = startswith(request.path, "/api/")

  # While Redis cannot answer: "allow" lets requests through, "deny" refuses them, "local"
  # limits each instance in process.
  on_error = "allow"

  # Each client address: a steady 5 requests a second, with bursts of up to 20 at once.
  # A request without an address is not limited by this rule.
  rule "per_ip" {
    algorithm = "gcra"
    when      = request.ip != ""
    key       = request.ip
    rate      = "5/s"
    burst     = 20
  }

  # Each signed-in user, from any number of addresses: up to 100 at once, then 10 a minute.
  rule "per_user" {
    algorithm = "token_bucket"
    when      = request.user != ""
    key       = request.user
    capacity  = 100
    rate      = "10/m"
  }
}

# Ten minutes of traffic on a virtual clock, against an embedded Redis: rlctl simulate runs
# it without waiting and without a Redis server.
scenario "scraper" {
  policy   = "api"
  duration = "10m"

  # Well-behaved: 50 users, each at an address of their own, 2 requests a minute.
  traffic "users" {
    clients = 50
    request = {
      path = "/api/items"
      ip   = "198.51.100.${client}"
      user = "user${client}"
    }
    rate    = "2/m"
    pattern = "poisson"
  }

  # Abusive: a scraper signed in as one user, 20 requests a second from one address.
  traffic "scraper" {
    request = {
      path = "/api/items"
      ip   = "203.0.113.7"
      user = "scraper"
    }
    rate = "20/s"
  }

  # What must hold after the run; rlctl simulate -check fails if one does not.
  expect {
    # No user is ever denied: 2 a minute is well within both rules.
    users_unaffected = denied("users") == 0

    # per_ip holds the scraper's address to 20 at once plus 5 a second.
    scraper_held_per_ip = max_allowed_in("scraper", "10s") <= 20 + 10 * 5

    # per_user holds the scraper's account to 100 at once plus 10 a minute.
    scraper_held_per_user = allowed("scraper") <= 100 + 10 * 10

    # per_ip denies the scraper first, while the account still has credit.
    per_ip_denies_scraper = denied_by("scraper", "per_ip") > 0

    # per_user denies it once the account's 100 are spent.
    per_user_denies_scraper = denied_by("scraper", "per_user") > 0
  }
}
