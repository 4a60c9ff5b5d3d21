"""Polling shared by the client scripts: the emulator answers asynchronously."""

import json
import time


def wait_for(what, fetch, ok, timeout=60.0):
    """Calls `fetch` every 0.1 s until `ok` holds for its answer, which it returns."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fetch()
        if ok(last):
            return last
        time.sleep(0.1)
    raise SystemExit("timed out waiting for %s; last answer: %s" % (what, json.dumps(last)))
