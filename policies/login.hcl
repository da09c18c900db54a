# Login brute-force protection.
#
# Three limits on POST /login, each against a different attack:
#   - one address trying many passwords or accounts (per_ip),
#   - many addresses trying one account: credential stuffing from a botnet (per_account),
#   - a flood that would exhaust the password hasher (all_logins).

policy "login" {
  match = request.path == "/login" && request.method == "POST"

  # Refuse logins while the limiter is down: an attacker must not win by overloading Redis.
  on_error = "deny"

  # 20 attempts in any 10 minutes per address, counted exactly.
  rule "per_ip" {
    algorithm = "sliding_log"
    when      = request.ip != ""
    key       = request.ip
    limit     = 20
    window    = "10m"
  }

  # 5 attempts at once per account, then one every 3 minutes. Usernames are
  # case-insensitive, so the key is too.
  rule "per_account" {
    algorithm = "gcra"
    when      = request.username != ""
    key       = lower(request.username)
    rate      = "1/3m"
    burst     = 5
  }

  # At most 200 logins a second across the service, with bursts of 400.
  rule "all_logins" {
    algorithm = "token_bucket"
    key       = "all"
    capacity  = 400
    rate      = "200/s"
  }
}

scenario "credential_stuffing" {
  policy   = "login"
  duration = "10m"

  # One address cycling through accounts.
  traffic "sprayer" {
    request = {
      ip       = "203.0.113.7"
      path     = "/login"
      method   = "POST"
      username = "victim"
    }
    rate = "2/s"
  }

  # 300 addresses of a botnet, all after the same account.
  traffic "botnet" {
    clients = 300
    request = {
      ip       = "192.0.2.${client % 256}"
      path     = "/login"
      method   = "POST"
      username = "Alice"
    }
    rate    = "1/m"
    pattern = "poisson"
  }

  # Real users, each logging in now and then.
  traffic "users" {
    clients = 100
    request = {
      ip       = "198.51.100.${client}"
      path     = "/login"
      method   = "POST"
      username = "user${client}"
    }
    rate = "1/5m"
  }

  expect {
    sprayer_stopped        = denied_fraction("sprayer") > 0.95
    botnet_stopped         = denied_fraction("botnet") > 0.95
    botnet_stopped_by_name = denied_by("botnet", "per_account") > 0
    users_unaffected       = denied("users") == 0
  }
}
