"""`date` command lines (guest/declaw_shell/datecmd.py), each run by the host's GNU date and in a
sandbox (tests/shell/test_date.py) with the same $TZ: stdout, the exit status and stderr must
match. Every `-d` string here is anchored to an absolute date, so that "now" plays no part;
the relative-to-now forms (`yesterday`, `3 days ago`) are checked against `date +%s` there.
Never a line that sets the clock (`-s`, `MMDDhhmm`): run as root, the host's date would set the
host's clock (it did once, in development); that the sandbox refuses is a guest-only test."""

from __future__ import annotations

FORMAT = "+%Y-%m-%d %H:%M:%S %Z %z"
DATES = [
    "2024-01-02", "2024-01-02 10:30", "2024-01-02T10:30:15", "2024-01-02T10:30:15Z", "2024-01-02 10:30:15 UTC",
    "2024-01-02T10:30:15+02:00", "2024-01-02 10:30 -0500", "2024-01-02T10:30:15.250Z", "2024-1-2",
    "01/02/2024", "12/25/99", "Jan 2 2024", "2 Jan 2024", "January 2, 2024", "2-Jan-2024", "Dec 31 2023 23:59",
    "20240102", "2024-01-02 3pm", "2024-01-02 3:45 pm", "2024-01-02 12am", "2024-01-02 noon",
    "2024-01-02 midnight", "2024-01-31 +1 month", "2024-01-31 1 month ago", "2024-03-31 -1 month",
    "2024-02-29 +1 year", "2024-01-02 +3 days", "2024-01-02 3 days ago", "2024-01-02 -2 weeks",
    "2024-01-02 +1 fortnight", "2024-01-02 10:00 +90 minutes", "2024-01-02 10:00 +36 hours",
    "2024-01-02 10:00 -1 sec", "2024-01-02 yesterday", "2024-01-02 tomorrow", "2024-01-02 next week",
    "2024-01-02 last month", "2024-01-02 next day", "2024-01-03 friday", "2024-01-03 next friday",
    "2024-01-03 last friday", "2024-01-05 friday", "2024-01-05 next friday", "2024-01-05 last friday",
    "2024-01-03 this wednesday", "@0", "@1700000000", "@1700000000.5", "@-86400",
    "2024-03-10 01:30 +1 hour", "2024-03-09 12:00 +1 day", "2024-11-03 00:30 +2 hours",
    "Tue Jan 2 10:00:00 UTC 2024", "Tue, 02 Jan 2024 10:00:00 +0000", "2024-01-02 10:00 +5",
    "2024-01-02 10:00 +0530", "2024-01-02 10:00 -05:00 +1 hour", "2024-01-02 10:00 +25 hours", "2024-01-02 +1",
    "2024-01-02 10:00Z", "2024-01-02 10:00 EST", "2024-06-15 first day", "2024-06-15 third week",
    "2024-06-15 next year", "2024-06-15 last sec", "Jan 2024", "2024-01-02 12:00:60", "2024-01-02 24:00",
    "2024-01-02 noon", "2024-01-02 ago", "2024-01-02 4:05:06.789 pm PDT",
]
CASES: list[tuple[list[str], str]] = [(["-d", d, FORMAT], tz) for d in DATES for tz in ("UTC", "America/New_York")]
CASES += [
    (["-u", "-d", "@1700000000"], "UTC"),
    (["-d", "@1700000000"], "America/New_York"),
    (["-d", "@1700000000", "-R"], "Europe/Paris"),
    (["-d", "@1700000000", "-I"], "UTC"),
    (["-d", "@1700000000", "-Iseconds"], "Asia/Kolkata"),
    (["-d", "@1700000000", "--iso-8601=minutes"], "UTC"),
    (["-d", "@1700000000", "--iso-8601=hours"], "UTC"),
    (["-d", "@1700000000.123456789", "--iso-8601=ns"], "UTC"),
    (["-d", "@1700000000", "--rfc-3339=seconds"], "UTC"),
    (["-d", "@1700000000", "--rfc-3339=date"], "UTC"),
    (["-d", "@1700000000.5", "--rfc-3339=ns"], "UTC"),
    (["--date=@1700000000", "+%s %N %3N %j %U %W %V %G %g %u %w %q %C %y"], "UTC"),
    (["-d", "@1700000000", "+%a %A %b %B %h %c"], "UTC"),
    (["-d", "@1700000000", "+%D %F %T %R %r %x %X %p %P"], "UTC"),
    (["-d", "@1699999000", "+%e|%-d|%_m|%-H|%k|%l|%I|%0e|%10Y|%-j|%^a|%^B|%#p|%#Z"], "UTC"),
    (["-d", "@1700000000", "+%z %:z %::z %:::z %Z"], "Asia/Kolkata"),
    (["-d", "@1700000000", "+%:::z"], "America/St_Johns"),
    (["-d", "@1700000000", "+literal %% %n%t end"], "UTC"),
    (["-d", "2024-12-30", "+%G-W%V-%u %Y"], "UTC"),
    (["-d", "2021-01-03", "+%G-W%V-%u %U %W"], "UTC"),
    (["-d", "2024-01-02"], "UTC"),
    (["-ud", "2024-01-02 10:00"], "America/New_York"),
    (["-d", "not a date"], "UTC"),
    (["-d", "2024-13-01"], "UTC"),
    (["-d", "2024-02-30"], "UTC"),
    (["-d", "25:00"], "UTC"),
    (["-x"], "UTC"),
    (["--nope"], "UTC"),
    (["-d"], "UTC"),
    (["-d", "@0", "+%Y", "extra"], "UTC"),
    (["-d", "@0", "-r", "x"], "UTC"),
    (["-I", "-d", "@0", "+%s"], "UTC"),
    (["--iso-8601=weeks", "-d", "@0"], "UTC"),
]
