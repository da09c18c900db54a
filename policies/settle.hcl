# Costs known only after the response: the tokens a language model's answer used.
#
# Each user may spend 20,000 tokens a minute (a token bucket), and each tenant 2,000,000
# tokens a calendar month in its own time zone. A chat request reserves an estimate of
# 1,000 tokens before it runs (engine.Reserve, httplimit.WithSettle, or the service's
# "settle": true) and settles its true cost when the answer is done: the difference is
# given back, or the overdraft is charged past the limit as a debt that the key owes,
# denied until its rules have earned it back (the retry-after exact). Over any interval
# the true costs exceed the limits by at most the overdrafts still unsettled at its last
# admission: one request's, for a caller that settles before it asks again (rlctl verify
# checks it: property "settle").

policy "llm" {
  match = request.path == "/v1/chat"

  rule "tokens_per_user" {
    algorithm = "token_bucket"
    key       = request.user
    when      = request.user != ""
    capacity  = 20000
    rate      = "20000/m"
  }

  rule "tokens_per_tenant_month" {
    algorithm = "fixed_window"
    key       = request.tenant
    when      = request.tenant != ""
    limit     = 2000000
    window    = "calendar_month"
    time_zone = "America/New_York"
  }
}

# Four users chat at 30 requests a minute each, one answer in four far longer than the
# estimate. Each answer takes 2 seconds; its true cost settles then.
scenario "chat" {
  policy   = "llm"
  duration = "10m"

  traffic "chats" {
    request = { path = "/v1/chat", user = "u${client}", tenant = "acme" }
    clients = 4
    rate    = "30/m"
    units   = 1000
    actual  = [300, 700, 1200, 4000]
    hold    = "2s"
  }

  expect {
    # The long answers run past the estimates: the users owe the difference, and their
    # later requests wait for the bucket to earn it back.
    overdrafts_owed = owed("chats") > 0
    users_held_back = denied_by("chats", "tokens_per_user") > 0
    # What each user spent, at its true cost, is within 10 minutes of its rate and a full
    # bucket, and one answer's overdraft (3,000) that had not settled.
    within_the_limit = settled("chats") <= 4 * (200000 + 20000 + 3000)
  }
}

# The month ends at midnight in New York: a tenant that spent its month's tokens, deep in
# debt from answers that ran long, starts April owing what it overdrew.
scenario "tokens_month_end" {
  policy     = "llm"
  duration   = "2h"
  start_time = "2027-03-31T23:00:00-04:00"

  traffic "batch" {
    request = { path = "/v1/chat", user = "batch-${client}", tenant = "globex" }
    clients = 10
    rate    = "20/m"
    units   = 5000
    actual  = [2000, 9000]
  }

  expect {
    month_spent  = settled("batch") > 2000000
    debt_carried = owed("batch") > 0
  }
}
