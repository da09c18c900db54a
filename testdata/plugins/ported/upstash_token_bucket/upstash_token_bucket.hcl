algorithm "upstash_token_bucket" {
  source   = "upstash_token_bucket.lua"
  params   = { max_tokens = "count", refill = "rate" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  doc      = "@upstash/ratelimit's tokenBucket: refilled refillRate at a time every interval."

  # The doc comment: "You have a bucket filled with `{maxTokens}` tokens that refills
  # constantly at `{refillRate}` per `{interval}`."
  guarantee "rate" {
    burst = param.max_tokens
    rate  = param.refill
    precision {
      resolution = "1ms" # Date.now(): milliseconds
    }
  }

  # HMGET of two fields, then HSET of two and PEXPIRE.
  work "hash" {
    commands = 3
    elements = 4
    entries  = 2
  }
}

policy "upstash_token_bucket" {
  # Ratelimit.tokenBucket(5, "10 s", 10): 5 tokens every 10 s, at most 10.
  rule "per_key" {
    algorithm  = "upstash_token_bucket"
    key        = "k"
    max_tokens = 10
    refill     = "5/10s"
  }
}
