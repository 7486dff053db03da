"""Drives the trace page in a real headless Chromium over the DevTools protocol (its
--remote-debugging-pipe, so nothing beyond the standard library is needed). Prints what the
page showed as JSON; any failure exits non-zero.

usage:
  page_driver.py ask CHROMIUM URL SCREENSHOT_PNG
      open URL (a page with ?q=), wait for its answer or its error; the DOM and a screenshot
  page_driver.py standing CHROMIUM BASE_URL QUESTION DOC_JSON_FILE SCREENSHOT_PNG
      ask QUESTION, register it with "Keep answering", post the document that completes its
      answer, and wait for the open page to show the new standing answer by itself
      (server-sent events)
"""

import base64
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

mode, chromium = sys.argv[1:3]


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands in) and 4 (replies out)."""

    def __init__(self):
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()
        # the child's ends above 4 first, so that placing them on 3 and 4 clobbers neither
        low = (cmd_r, out_w)
        cmd_r, out_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in low)
        for fd in low:
            os.close(fd)
        self.profile = tempfile.TemporaryDirectory()

        def fds():
            os.dup2(cmd_r, 3)
            os.dup2(out_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
             "--remote-debugging-pipe", "--window-size=1366,1000", f"--user-data-dir={self.profile.name}", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(out_w)
        self.next_id = 0
        self.buf = b""
        self.session = None

    def _read(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.out_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]

    def open(self, url):
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Page.navigate", url=url)

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, what, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                v = self.js(expr)
            except RuntimeError:
                v = None  # the page is still loading
            if v:
                return v
            time.sleep(0.2)
        raise AssertionError(f"the page never showed {what} ({timeout} s): {self.js('document.body.innerText')}")

    def close(self):
        self.proc.kill()
        self.proc.wait()


def item(b):
    """The standing query's entry on the page: its id, documents, reason and update count."""
    return b.js("""(() => { const li = document.querySelector('#standing li[data-sub]');
        return li && { id: li.dataset.sub, docs: li.dataset.docs.split(' ').filter(Boolean),
                       reason: li.dataset.reason, updates: Number(li.dataset.updates), text: li.innerText }; })()""")


def screenshot(b, path):
    png = base64.b64decode(b.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
    open(path, "wb").write(png)
    return len(png)


def ask(b, url, shot):
    b.open(url)
    b.wait("document.body.dataset.answered === 'true' || document.getElementById('error').textContent !== ''", "an answer or an error")
    b.wait("!document.getElementById('live').textContent.includes('loading')", "the live counts")
    # each ranked document's text is fetched on its own
    b.wait("[...document.querySelectorAll('#documents details.text summary')].every((s) => s.textContent !== '...')", "the documents' text")
    time.sleep(0.5)  # the subgraph is drawn in the same task as the answer; let layout settle
    dom = b.js("document.documentElement.outerHTML")
    print(json.dumps({"dom": dom, "screenshot_bytes": screenshot(b, shot)}))


def standing(b, base, question, doc_file, shot):
    b.open(f"{base}/?q={urllib.parse.quote(question)}")
    b.wait("document.body.dataset.answered === 'true'", "an answer")
    b.wait("document.body.dataset.standing === 'live'", "the standing queries' event stream open")
    b.js("document.getElementById('keep').click()")
    b.wait("document.querySelector('#standing li[data-sub]') && document.querySelector('#standing li[data-sub]').dataset.reason", "the new standing query's first answer")
    before = item(b)

    doc = json.load(open(doc_file))
    req = urllib.request.Request(f"{base}/documents", data=json.dumps(doc).encode(), headers={"content-type": "application/json"}, method="POST")
    assert urllib.request.urlopen(req).status == 202
    b.wait(f"(document.querySelector('#standing li[data-sub]').dataset.docs || '').split(' ').includes({json.dumps(doc['id'])})",
           f"the standing answer with {doc['id']}")
    after = item(b)

    # the registered subscription is the one the node holds
    listed = json.load(urllib.request.urlopen(f"{base}/subscriptions"))
    print(json.dumps({"before": before, "after": after, "listed": listed, "screenshot_bytes": screenshot(b, shot)}))


b = Browser()
try:
    if mode == "ask":
        ask(b, *sys.argv[3:5])
    elif mode == "standing":
        standing(b, *sys.argv[3:7])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
finally:
    b.close()
