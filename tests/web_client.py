"""Reaching `orbit web` from tests under the home's secret host name (`o-….localhost`).

Browsers resolve `*.localhost` to the loopback themselves; glibc here does not, nor does Node,
which makes Playwright's `page.request` calls. So:

- Python clients connect to 127.0.0.1 and send the secret name as `Host` (`loopback`);
- a Chromium test asks the page's own browser (`browser_fetch`, a `fetch()` in a page of the
  same context, with its cookies), never `page.request`.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit


def loopback(url: str) -> tuple[str, dict[str, str]]:
    """`url` on 127.0.0.1 (same port, path and query) and the headers naming its host."""
    parts = urlsplit(url)
    direct = urlunsplit(("http", f"127.0.0.1:{parts.port}", parts.path, parts.query, ""))
    return direct, {"Host": parts.netloc}


FETCH_JS = """async ([url, method, form]) => {
  const init = {method, credentials: 'include', redirect: 'manual'};
  if (form) init.body = new URLSearchParams(form);
  const r = await fetch(url, init);
  return [r.status, await r.text()];
}"""


class Fetched(NamedTuple):
    status: int  # 0 for a redirect (not followed)
    body: str

    def text(self) -> str:  # as Playwright's APIResponse
        return self.body

    def json(self) -> Any:
        return json.loads(self.body)


def browser_fetch(
    page: Any, url: str, *, method: str = "GET", form: dict[str, str] | None = None
) -> Fetched:
    """A request made by the page's Chromium, with its cookies. It runs in a page of its own
    on the same server (fetch reads only its own origin; Chromium logs each 4xx it gets as a
    console error, which would count against the test's page)."""
    parts = urlsplit(url)
    helper = page.context.new_page()
    try:
        helper.goto(f"{parts.scheme}://{parts.netloc}/login")
        status, text = helper.evaluate(FETCH_JS, [url, method, form])
    finally:
        helper.close()
    return Fetched(int(status), str(text))


def browser_json(page: Any, url: str) -> Any:
    status, text = browser_fetch(page, url)
    assert status == 200, (url, status, text[:300])
    return json.loads(text)
