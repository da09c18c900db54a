# Concurrency limit for uploads.
#
# Uploads hold a connection and a worker for as long as they last, so what matters is how
# many run at once, not how many start per second. Each upload takes a lease when it
# starts and returns it when it finishes; a lease that is never returned (a crashed
# client) expires after ttl. Denials here mean "busy, try shortly" (503), not 429.

policy "uploads" {
  match = request.method == "POST" && startswith(request.path, "/upload") && request.user != ""

  # Uploads are expensive: refuse them rather than run them unlimited.
  on_error = "deny"

  # At most 3 uploads at a time per user.
  rule "per_user" {
    algorithm = "concurrency"
    key       = request.user
    max       = 3
    ttl       = "10m"
  }

  # At most 100 uploads at a time across the service: the size of the worker pool.
  rule "workers" {
    algorithm = "concurrency"
    key       = "all"
    max       = 100
    ttl       = "10m"
  }

  # Volume: each user may upload 2 GiB at once and 1 GiB an hour after that, charged in
  # MiB. A request without a usable content_length is charged 1 MiB.
  rule "volume_per_user" {
    algorithm = "token_bucket"
    key       = request.user
    capacity  = 2048
    rate      = "1024/h"
    cost      = try(max(1, ceil(tonumber(request.content_length) / 1048576)), 1)
  }
}

scenario "greedy_uploader" {
  policy   = "uploads"
  duration = "10m"

  # One user starting an upload every second, each taking 10 seconds.
  traffic "greedy" {
    request = {
      method         = "POST"
      path           = "/upload"
      user           = "mallory"
      content_length = "1048576"
    }
    rate = "1/s"
    hold = "10s"
  }

  # Ordinary users uploading a file now and then.
  traffic "normal" {
    clients = 50
    request = {
      method         = "POST"
      path           = "/upload"
      user           = "u${client}"
      content_length = "5242880"
    }
    rate    = "1/2m"
    pattern = "poisson"
    hold    = "10s"
  }

  expect {
    greedy_capped     = denied_by("greedy", "per_user") > 0
    greedy_mostly_out = denied_fraction("greedy") > 0.5
    normal_unaffected = denied("normal") == 0
  }
}
