"""Debian's headless Chromium for the browser tests (tests/browser/): chromedriver through
python3-selenium (packages chromium, chromium-driver, python3-selenium)."""
import os
import sys
import time

SKIP = 77  # ctest's SKIP_RETURN_CODE of the browser tests
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def skip_without_chromium(what):
    """Exits 77 (skipped), saying so loudly, when Chromium is not installed."""
    if os.access(CHROMIUM, os.X_OK):
        return
    bar = "#" * 78
    print("%s\n# SKIPPED: %s is not installed, so %s was NOT\n"
          "# tested in a browser. Install Debian's packages to run it:\n"
          "#   apt-get install -y chromium chromium-driver python3-selenium\n%s"
          % (bar, CHROMIUM, what, bar), flush=True)
    sys.exit(SKIP)


def open_browser(tmp, size="1400,1300"):
    """A headless Chromium with a fresh profile under tmp (and chromedriver's log there)."""
    try:
        # pylint: disable-next=import-outside-toplevel
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service  # pylint: disable=import-outside-toplevel
    except ImportError:
        sys.exit("python3-selenium is missing (chromium is installed): "
                 "apt-get install -y chromium-driver python3-selenium")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    # As root on a machine without a network: polyglot.md's flags, and a fresh profile.
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run", "--window-size=" + size,
              "--user-data-dir=" + os.path.join(tmp, "chromium-profile")):
        opts.add_argument(a)
    service = Service(CHROMEDRIVER, log_path=os.path.join(tmp, "chromedriver.log"))
    return webdriver.Chrome(service=service, options=opts)


def wait_for(what, fn, timeout, poll=0.05):
    """fn()'s first truthy value, polled every `poll` s; AssertionError after `timeout` s."""
    until = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() >= until:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(poll)
