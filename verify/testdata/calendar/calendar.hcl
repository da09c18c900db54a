# Calendar quotas for the calendar property's tests: months in New York (a daylight-
# saving zone), days in Berlin and in Kathmandu (UTC+5:45), weeks from Sunday in
# Santiago (whose changes happen at midnight) and a year in UTC; a boxed one too.
policy "quotas" {
  clock = "client"
  rule "monthly" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 10000
    window    = "calendar_month"
    time_zone = "America/New_York"
  }
  rule "daily" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 5
    window    = "calendar_day"
    time_zone = "Europe/Berlin"
  }
  rule "daily_kathmandu" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 3
    window    = "calendar_day"
    time_zone = "Asia/Kathmandu"
    block_for = "1h"
  }
  rule "weekly" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 20
    window    = "calendar_week_sunday"
    time_zone = "America/Santiago"
  }
  rule "yearly" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 1000
    window    = "calendar_year"
  }
}
