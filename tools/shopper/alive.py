#!/usr/bin/env python3
"""tools/shopper/alive.py: the shopper's health check (compose healthcheck, Kubernetes probes).

    alive.py [MAX_AGE_S]      exit 0 when $SHOPPER_STATS_FILE was written in the last MAX_AGE_S
                              seconds (default 30), 1 otherwise, with the reason on stdout

The locustfile rewrites that file every 5 s while Locust runs its shoppers (and once more at the
end), so a fresh file means the load generator is alive and its event loop turns. Whether the shop
answers is not its health: that is in the file's figures and on the dashboards. Standard library
only: it starts in a few milliseconds, without Locust.
"""
import os
import sys
import time

path = os.environ.get("SHOPPER_STATS_FILE", "")
max_age = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
if not path:
    print("SHOPPER_STATS_FILE is not set")
    sys.exit(1)
try:
    age = time.time() - os.stat(path).st_mtime
except OSError as e:
    print(f"{path}: {e.strerror}")
    sys.exit(1)
print(f"{path}: written {age:.0f} s ago")
sys.exit(0 if age <= max_age else 1)
