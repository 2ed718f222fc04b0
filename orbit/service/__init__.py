"""What runs Orbit's processes with nobody typing: systemd user units, the crontab line, the
foreground loop (`orbit scheduler run`) and the short-lived per-home ticker.

Above execute/ (the loops start shepherds), below the CLI and the web view. Returns data and
raises OrbitError; never prints.
"""
