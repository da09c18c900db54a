# Quotas as plans sell them: 100 requests a day and 500 a month, per tenant, where the
# day and the month are the customer's, in Berlin.
#
# window = "calendar_day" (or calendar_week, calendar_week_sunday, calendar_month,
# calendar_year) with time_zone = "<IANA name>" makes a fixed_window count in calendar
# periods: each starts at the zone's local midnight, so a day is 23 or 25 hours long on a
# daylight-saving change and a month 28 to 31 days. A denial's retry-after and the
# RateLimit headers' reset point at the next local midnight, to the microsecond. The tz
# database is built in: no system files are needed.

policy "plans" {
  rule "daily" {
    algorithm = "fixed_window"
    key       = request.tenant
    when      = request.tenant != ""
    limit     = 100
    window    = "calendar_day"
    time_zone = "Europe/Berlin"
  }

  rule "monthly" {
    algorithm = "fixed_window"
    key       = request.tenant
    when      = request.tenant != ""
    limit     = 500
    window    = "calendar_month"
    time_zone = "Europe/Berlin"
  }
}

# A week that crosses Europe's change to summer time (Sunday 28 March 2027, a day of 23
# hours) and the end of March. acme sends a request a minute, day and night: 100 pass each
# day until the month's 500 are spent on the 30th; the 31st is refused whole by the
# month; April's first day has its 100 again.
scenario "month_end" {
  policy     = "plans"
  start_time = "2027-03-26T00:00:00+01:00"
  duration   = "167h" # 26 March to 2 April, local midnight to local midnight

  traffic "acme" {
    request = { tenant = "acme" }
    rate    = "1/m"
  }

  expect {
    five_days_then_april = allowed("acme") == 600
    march_31_refused     = denied_by("acme", "monthly") == 1440
    days_capped          = denied_by("acme", "daily") == requests("acme") - 600 - 1440
  }
}
