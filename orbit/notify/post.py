"""One POST to an endpoint, with the standard library and a short timeout.

A network failure (refused, reset, timed out, a name that does not resolve) is a Verdict that
asks for a retry, never an exception: the sender logs it and tries again later.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from orbit.notify.message import Message
from orbit.notify.platforms import Request, Verdict, judge, render

TIMEOUT_S = 10.0  # a hanging endpoint holds only its own queue, and only this long
READ_LIMIT = 64 * 1024  # of the reply: the log keeps only its start anyway
KEY_HEADER = "X-Orbit-Idempotency-Key"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is misconfigured; following it could post elsewhere."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))


def request_for(kind: str, url: str, secret: str | None, message: Message, now: float) -> Request:
    """The platform's request, with the message's key as the idempotency header."""
    req = render(kind, url, secret, message, now)
    return Request(req.url, req.body, {**req.headers, KEY_HEADER: message.key})


def post(kind: str, req: Request, timeout: float = TIMEOUT_S) -> Verdict:
    http = urllib.request.Request(req.url, data=req.body, headers=req.headers, method="POST")
    try:
        with _OPENER.open(http, timeout=timeout) as answer:
            return judge(kind, answer.status, answer.read(READ_LIMIT))
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read(READ_LIMIT)
        except OSError:
            body = b""
        return judge(kind, exc.code, body)
    except urllib.error.URLError as exc:
        reason = exc.reason
        text = reason.strerror if isinstance(reason, OSError) and reason.strerror else reason
        return Verdict(False, True, f"not reached: {text}")
    except TimeoutError:
        return Verdict(False, True, f"no answer within {timeout:g} s")
    except (OSError, ValueError) as exc:  # reset mid-answer, a malformed reply
        return Verdict(False, True, f"not reached: {exc.__class__.__name__}: {exc}")
