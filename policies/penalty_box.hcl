# A penalty box for password guessing.
#
# Without one, a rate limit only paces an attacker: an address allowed 10 attempts a minute
# gets 10 more every minute, forever. With block_for, the first refusal puts the address in
# the box: every request is refused, and not counted, until the block ends. block_max makes
# repeat offenders wait longer each time (twice the last block, up to the ceiling), as
# fail2ban's bantime.increment does; an address that behaves for block_max after a block is
# forgiven. rlctl verify checks the box on every rule that has one ("penalty box").

policy "sign_in" {
  match = request.path == "/sign-in"

  # 10 attempts in any minute per address; the 11th starts a block of a minute, then 2, 4,
  # 8, up to 16 minutes for an address that keeps at it.
  rule "per_ip" {
    algorithm = "sliding_log"
    when      = request.ip != ""
    key       = request.ip
    limit     = 10
    window    = "1m"
    block_for = "1m"
    block_max = "16m"
  }
}

scenario "guessing" {
  policy   = "sign_in"
  duration = "30m"

  # One address guessing a password a second, for half an hour.
  traffic "guesser" {
    request = {
      ip   = "203.0.113.7"
      path = "/sign-in"
    }
    rate = "1/s"
  }

  # People signing in now and then, a mistyped password or two among them.
  traffic "people" {
    clients = 50
    request = {
      ip   = "198.51.100.${client}"
      path = "/sign-in"
    }
    rate    = "1/2m"
    pattern = "poisson"
  }

  expect {
    # Paced by the rate alone, the guesser would get 10 a minute: 300 in 30 minutes.
    # Boxed, with blocks of 1, 2, 4, 8 and 16 minutes, it gets 10 before each block.
    guesser_boxed     = allowed("guesser") <= 60
    boxed_by_the_rule = denied_by("guesser", "per_ip") > 1700
    people_unaffected = denied("people") == 0
  }
}
