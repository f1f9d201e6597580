#!/usr/bin/env python3
"""Drives headless Chromium over the DevTools protocol (--remote-debugging-pipe: JSON
messages ended by NUL on fds 3 and 4), with nothing but the standard library, for tests
that check web pages: open a URL, then answer one JSON command per stdin line with one JSON
line on stdout —
  {"eval": "<expression>"}      the expression's value (promises awaited)
  {"screenshot": "<path.png>"}  writes a PNG of the viewport
  {"quit": true}                closes the browser
Usage: cdp.py URL [WIDTH HEIGHT]"""

import base64
import json
import os
import subprocess
import sys
import tempfile


def main():
    url = sys.argv[1]
    width, height = (sys.argv[2], sys.argv[3]) if len(sys.argv) > 3 else ("1600", "720")
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    profile = tempfile.TemporaryDirectory()

    def child_fds():
        # Through fresh descriptors first: a pipe may already be 3 or 4, and dup2 onto itself
        # would keep its close-on-exec flag.
        read, write = os.dup(to_browser_r), os.dup(from_browser_w)
        os.dup2(read, 3)
        os.dup2(write, 4)
        os.set_inheritable(3, True)
        os.set_inheritable(4, True)

    browser = subprocess.Popen(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--remote-debugging-pipe", f"--user-data-dir={profile.name}",
         f"--window-size={width},{height}", "about:blank"],
        # Not close_fds: the pipes are dup'ed onto 3 and 4 before the fds are closed.
        preexec_fn=child_fds, close_fds=False,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_browser_r)
    os.close(from_browser_w)
    out = os.fdopen(to_browser_w, "wb", buffering=0)
    inp = os.fdopen(from_browser_r, "rb", buffering=0)
    pending = bytearray()
    counter = [0]

    def send(method, params=None, session=None):
        counter[0] += 1
        message = {"id": counter[0], "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        out.write(json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in pending:
                chunk = inp.read(65536)
                if not chunk:
                    raise SystemExit("chromium closed the pipe")
                pending.extend(chunk)
            end = pending.index(b"\0")
            reply = json.loads(pending[:end])
            del pending[: end + 1]
            if reply.get("id") == counter[0]:
                if "error" in reply:
                    raise SystemExit(f"{method}: {reply['error']}")
                return reply["result"]

    targets = send("Target.getTargets")["targetInfos"]
    page = next(t["targetId"] for t in targets if t["type"] == "page")
    session = send("Target.attachToTarget", {"targetId": page, "flatten": True})["sessionId"]
    send("Page.enable", session=session)
    send("Page.navigate", {"url": url}, session=session)
    print(json.dumps({"opened": url}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "eval" in command:
            result = send("Runtime.evaluate", {"expression": command["eval"], "returnByValue": True,
                                               "awaitPromise": True}, session=session)
            if "exceptionDetails" in result:
                answer = {"error": result["exceptionDetails"].get("text", "exception")}
            else:
                answer = {"value": result["result"].get("value")}
        elif "screenshot" in command:
            data = send("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
            with open(command["screenshot"], "wb") as f:
                f.write(base64.b64decode(data))
            answer = {"written": command["screenshot"]}
        else:
            break
        print(json.dumps(answer), flush=True)
    try:
        send("Browser.close")
    except SystemExit:
        pass
    browser.wait(timeout=10)


if __name__ == "__main__":
    main()
