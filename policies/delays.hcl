# Delay instead of deny: a client that would rather wait its turn than be refused.
#
# Each user may ask for 2 reports a second, with bursts of 4. A request past that is
# refused with 429 and Retry-After, unless its caller waits: engine.Wait (or httplimit's
# WithDelay) reserves the earliest slot the rule allows within the caller's max delay, in
# the same atomic call, and the request goes on when its slot comes. Requests that wait
# are spaced exactly as the rate spaces them (rlctl verify checks it: property "delay"),
# and a caller that gives up gives its slot back.

policy "reports" {
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    when      = request.user != ""
    rate      = "2/s"
    burst     = 4
  }
}

# Two batch jobs each ask for 3 exports a second, one more than their rate: the patient
# one may wait up to 5 seconds a request, the other is refused what it asks too early.
# (A refused patient request's Retry-After goes to the requests queued behind it, so the
# report counts that advice as not honoured.)
scenario "batch_jobs" {
  policy   = "reports"
  duration = "1m"

  traffic "patient" {
    request   = { user = "nightly" }
    rate      = "3/s"
    max_delay = "5s"
  }

  traffic "impatient" {
    request = { user = "adhoc" }
    rate    = "3/s"
  }

  expect {
    # The waits queue up to the max delay, then requests are refused again.
    waits_bounded = waited("patient") > 100 && max_wait("patient") <= 5
    # Counted when they go on, the patient job's requests keep the rate: at most the
    # burst and 2 a second in any 10 seconds.
    kept_the_rate = max_allowed_in("patient", "10s") <= 4 + 2 * 10
    fewer_refused = denied("patient") < denied("impatient")
  }
}
