"""A Feishu app's cards, and their delivery to the users paired with its bot.

    run_card(home, run_id, *, image_key=None) -> dict     a run's card (a finished run's
                                                          notification; the bot's /show)
    group_card(home, group, *, image_key=None, …) -> dict a group's summary card
    deliver(home, profile, message, …) -> Verdict         the sender's: one queued message
    send_test(home, profile) -> list[Sent]                `orbit notify test NAME`

A card is Feishu's message card JSON (the 1.0 structure: `config`, `header`, `elements`;
lark.py's `card()`), sent as an `interactive` message, at most CARD_BYTES (Feishu refuses one
past 30 KB): the log tail is cut first, then the lists, then every text. Everything a run or a
person wrote (names, commands, reasons, logs) is `plain_text`, which Feishu never formats; the
log tail alone is `markdown`, for its code block, with a zero-width space after each backtick
and each `<`, so that a log line can neither close the block nor be read as a mention tag.

Delivery (docs/notify.md, "The Feishu bot"): a tenant token, the curves (curves.py) uploaded
once, then the card sent to each paired user (store/feishu.py) with a uuid derived from the
message's key and the user: Feishu makes a repeat of a uuid within an hour a no-op, so a batch
sent again after a crash or a transient error reaches nobody twice.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from orbit.errors import CorruptError, NotFoundError, OrbitError
from orbit.execute.watching import gpu_peak_text, peaks_text
from orbit.human import fmt_cpus, fmt_metric, fmt_num, gpu_phrase, human_seconds
from orbit.notify import curves
from orbit.notify.fit import cut
from orbit.notify.lark import CARD_BYTES, Lark, LarkError, card, card_bytes, lark_for, plain
from orbit.notify.message import (
    FAILED,
    MAX_FAILURES,
    SEVERITY,
    Message,
    log_tail,
    web_url_of,
    worst,
)
from orbit.notify.platforms import Verdict
from orbit.notify.profiles import Profile
from orbit.review.best import AXES, best_run, finals
from orbit.review.objective import declared_of, resolve, way_text
from orbit.review.parse import Metrics
from orbit.store.describe import duration_s
from orbit.store.feishu import load_users
from orbit.store.home import Home
from orbit.store.lognote import log_note
from orbit.store.model import Run, RunState
from orbit.store.runs import Broken, RunStore

log = logging.getLogger(__name__)

LOG_LINES = 20
MAX_METRICS = 8
ZWSP = "\u200b"
LINK_TEXT = "Open in Orbit"
# Answers that mean "too fast": the endpoint waits (lark.RETRY_CODES has them too).
LIMITED_CODES = {99991400, 230020, 11232}
# What to fix, and where, when Feishu refuses for good: the developer console's page
# (https://open.feishu.cn/app, your app; Lark: open.larksuite.com/app).
CONSOLE_FIX = {
    10003: "check the app id on the app's Credentials & Basic Info page",
    10014: "copy the secret from the app's Credentials & Basic Info page, then `orbit notify add "
    "NAME --kind feishu-app --app-id … --secret-stdin --replace`",
    99991672: "add the permission im:message:send_as_bot (and im:resource for the curves) on "
    "the app's Permissions & Scopes page, then publish a version",
    99991679: "add the permission im:message:send_as_bot on the app's Permissions & Scopes "
    "page, then publish a version",
    230006: "enable the Bot feature on the app's Add Features page, then publish a version",
    230013: "the user is outside the app's availability: widen it on the Version Management & "
    "Release page, then publish a version",
}


@dataclass(frozen=True)
class Budget:
    """How much of the long parts a card may hold; smaller ones until it fits CARD_BYTES."""

    log_lines: int = LOG_LINES
    items: int = MAX_METRICS  # metrics, failures listed
    chars: int = 2000  # of any one text


BUDGETS = (Budget(), Budget(10), Budget(5, 8, 800), Budget(0, 4, 400), Budget(0, 0, 200))


def fitted(build: Callable[[Budget], dict[str, Any]]) -> dict[str, Any]:
    """The first card `build` makes within CARD_BYTES, cutting the log, then the lists, then
    each text; the smallest when none fits."""
    made: dict[str, Any] = {}
    for budget in BUDGETS:
        made = build(budget)
        if card_bytes(made) <= CARD_BYTES:
            return made
    return made


# --- elements ---------------------------------------------------------------------------------
def _fields(pairs: list[tuple[str, str]], chars: int) -> dict[str, Any]:
    return {
        "tag": "div",
        "fields": [{"is_short": True, "text": plain(cut(f"{k}: {v}", chars))} for k, v in pairs],
    }


def _text(text: str, chars: int) -> dict[str, Any]:
    return {"tag": "div", "text": plain(cut(text, chars))}


def code_block(text: str) -> dict[str, Any]:
    """The log tail as a markdown code block that nothing inside can close or turn into a
    mention (a zero-width space after each backtick and each `<`; it reads the same)."""
    safe = text.replace("`", "`" + ZWSP).replace("<", "<" + ZWSP)
    return {"tag": "markdown", "content": f"```\n{safe}\n```"}


def image(image_key: str, what: str) -> dict[str, Any]:
    return {
        "tag": "img",
        "img_key": image_key,
        "alt": plain(what),
        "scale_type": "fit_horizontal",
        "preview": True,
    }


def _button(link: str) -> dict[str, Any]:
    button = {"tag": "button", "text": plain(LINK_TEXT), "type": "primary", "url": link}
    return {"tag": "action", "actions": [button]}


# --- a run ------------------------------------------------------------------------------------
def resources_text(run: Run) -> str:
    res = run.resources
    parts = [fmt_cpus(res.cpus), f"{fmt_num(res.mem_gb)} GiB"]
    if res.gpus:
        parts.append(gpu_phrase(res.gpus, res.gpu_ids, res.gpu_mem_gb))
    return ", ".join(parts)


def run_title(run: Run) -> str:
    state, reason = run.state.value, run.reason or ""
    title = f"run {run.label} {state}"
    if reason and run.state is not RunState.SUCCEEDED:
        title += f": {reason}"
    return title


def _metric_pairs(m: Metrics, main: str | None) -> list[tuple[str, str]]:
    keys = [k for k in m.series if k not in AXES]
    if main in keys:
        keys = [main, *(k for k in keys if k != main)]
    return [(k, fmt_metric(m.series[k].last)) for k in keys]


def run_card(
    home: Home, run_id: str, *, image_key: str | None = None, web_url: str | None = None
) -> dict[str, Any]:
    """The card of run `run_id` (any state; a finished run's is its notification): the title
    in the state's colour, id, name, command, duration, the resources asked and the measured
    peaks, the final value of each metric (the main one first), for a failed or lost run its
    reason and the last LOG_LINES lines of its log, the curves when `image_key` is given, a
    link to its page with the `web_url` setting. Raises NotFoundError for an unknown run."""
    run = RunStore(home).load(run_id)
    declared = declared_of(home, run.group)[0]
    metrics = curves.read(run, curves.deadline())
    main, _ = curves.main_metric([run], {run.id: metrics}, None, None, declared)
    link = web_url if web_url is not None else web_url_of(home)
    link = f"{link.rstrip('/')}/runs/{run.id}" if link else None
    tail = log_tail(run, LOG_LINES) if run.state.value in FAILED else None
    return fitted(lambda b: _run_card(run, metrics, main, tail, image_key, link, b))


def _run_card(
    run: Run,
    metrics: Metrics,
    main: str | None,
    tail: str | None,
    image_key: str | None,
    link: str | None,
    b: Budget,
) -> dict[str, Any]:
    state = run.state.value
    ran = duration_s(run.status)
    pairs = [("id", run.id), ("state", state), ("duration", human_seconds(ran))]
    if run.name:
        pairs.insert(1, ("name", run.name))
    if run.group:
        pairs.append(("group", run.group))
    elements: list[dict[str, Any]] = [_fields(pairs, b.chars)]
    command = run.spec.get("command") or []
    if isinstance(command, list) and command:
        elements.append(_text("command: " + " ".join(str(c) for c in command), b.chars))
    peaks = run.status.get("peaks") if isinstance(run.status.get("peaks"), dict) else {}
    lines = [f"resources: {resources_text(run)}"]
    if peaks:
        lines.append(f"peaks: {peaks_text(peaks, ran)}")
        gpus = [g for g in peaks.get("gpus") or [] if isinstance(g, dict)]
        if gpus:
            lines.append("GPU peaks: " + "; ".join(gpu_peak_text(g) for g in gpus))
    else:
        lines.append("peaks: not measured")
    note = log_note(run.status)
    if note:
        lines.append(f"log: {note}")
    elements.append(_text("\n".join(lines), b.chars))
    if state in FAILED or (state == RunState.CANCELLED.value and run.reason):
        elements.append(_text(f"reason: {run.reason or 'no reason recorded'}", b.chars))
    shown = _metric_pairs(metrics, main)
    if shown and b.items:
        more = len(shown) - b.items
        chosen = shown[: b.items]
        if more > 0:
            chosen.append(("more metrics", str(more)))
        elements.append({"tag": "hr"})
        elements.append(_fields(chosen, b.chars))
        if main in metrics.series:
            s = metrics.series[main]
            elements.append(
                _text(
                    f"{main}: last {fmt_metric(s.last)}, min {fmt_metric(s.min)}, "
                    f"max {fmt_metric(s.max)} ({s.count} points)",
                    b.chars,
                )
            )
    if image_key:
        elements.append(image(image_key, f"metric curves of run {run.id}"))
    if tail and b.log_lines:
        lines_ = tail.split("\n")[-b.log_lines :]
        text = "\n".join(line[: b.chars] for line in lines_)
        elements.append({"tag": "hr"})
        elements.append(_text(f"the log's last {len(lines_)} lines:", b.chars))
        elements.append(code_block(text))
    if link:
        elements.append(_button(link))
    return card(cut(run_title(run), 200), state, elements)


# --- a group ----------------------------------------------------------------------------------
def group_runs(home: Home, group: str) -> list[Run]:
    """The runs of `group` (ids in order), the unreadable left out."""
    store = RunStore(home)
    ids = [
        str(row["id"])
        for row in store.list_rows()
        if not isinstance(row, Broken) and row.get("group") == group
    ]
    runs = [r for r in store.load_many(ids) if isinstance(r, Run)]
    return sorted(runs, key=lambda r: (len(r.id), r.id))


def group_card(
    home: Home,
    group: str,
    *,
    image_key: str | None = None,
    metric: str | None = None,
    direction: str | None = None,
    web_url: str | None = None,
) -> dict[str, Any]:
    """The summary card of `group`: counts by state, the best succeeded run by the final value
    of the group's objective (`metric` and `direction` when given, as a profile's --metric,
    else declared, else picked), the failed and lost runs with their reasons, the curves when
    `image_key` is given. Raises NotFoundError when the group has no run."""
    runs = group_runs(home, group)
    if not runs:
        raise NotFoundError(f"no runs in group {group!r}")
    declared = declared_of(home, group)[0]
    o = resolve(finals(runs).values(), metric=metric, direction=direction, declared=declared,
                group=group)  # fmt: skip
    best = best_run(runs, o.metric, o.maximize) if o.ok and o.metric else None
    best_text = None
    if best is not None and o.metric:
        label = f"{best.id} ({best.name})" if best.name else best.id
        way = way_text(o.direction).replace(" is better", "")
        best_text = f"best {o.metric} ({way}, {o.short_why}): {fmt_metric(best.value)}, run {label}"
    elif o.problem and any(r.state is RunState.SUCCEEDED for r in runs):
        best_text = o.problem
    link = web_url if web_url is not None else web_url_of(home)
    link = f"{link.rstrip('/')}/?{urlencode({'group': group})}" if link else None
    return fitted(lambda b: _group_card(group, runs, best_text, image_key, link, b))


def _group_card(
    group: str,
    runs: list[Run],
    best_text: str | None,
    image_key: str | None,
    link: str | None,
    b: Budget,
) -> dict[str, Any]:
    counts = Counter(r.state.value for r in runs)
    state = worst(counts) if counts else RunState.SUCCEEDED.value
    counted = ", ".join(f"{counts[s]} {s}" for s in reversed(SEVERITY) if counts[s])
    n = len(runs)
    finished = not any(r.state.active for r in runs)
    title = f"group {group} {'finished' if finished else 'so far'}: {n} run{'' if n == 1 else 's'}"
    title += f", {counted}"
    pairs = [("runs", str(n))] + [(s, str(counts[s])) for s in SEVERITY if counts[s]]
    elements: list[dict[str, Any]] = [_fields(pairs, b.chars)]
    if best_text:
        elements.append(_text(best_text, b.chars))
    if image_key:
        elements.append(image(image_key, f"metric curves of group {group}"))
    failures = [r for r in runs if r.state.value in FAILED]
    cap = min(b.items, MAX_FAILURES) if b.items else 0
    if failures:
        lines = [
            f"run {r.label} {r.state.value}: {r.reason or 'no reason recorded'}"
            for r in failures[:cap]
        ]
        if len(failures) > cap:
            lines.append(f"… and {len(failures) - cap} more failed")
        elements.append({"tag": "hr"})
        elements.append(_text("\n".join(lines), b.chars * 2))
    if link:
        elements.append(_button(link))
    return card(cut(title, 200), state, elements)


# --- a message that is neither (a digest, a test, a run since removed) ------------------------
def message_card(m: Message, image_key: str | None = None) -> dict[str, Any]:
    """A Message (message.py) as a card, when its run or group cannot be read any more."""

    def build(b: Budget) -> dict[str, Any]:
        elements: list[dict[str, Any]] = []
        if m.fields:
            elements.append(_fields(m.fields[: max(b.items, 4)], b.chars))
        if m.lines:
            elements.append(_text("\n".join(m.lines), b.chars * 2))
        if image_key:
            elements.append(image(image_key, "metric curves"))
        if m.code and b.log_lines:
            elements.append(code_block("\n".join(m.code.split("\n")[-b.log_lines :])))
        if m.link:
            elements.append(_button(m.link))
        return card(cut(m.title, 200), m.state, elements or [_text(m.title, b.chars)])

    return fitted(build)


# --- delivery ---------------------------------------------------------------------------------
def _subject(m: Message) -> tuple[str, str] | None:
    """("run", id) or ("group", name) from a message's key (message.py makes them:
    `run-<id>-<state>`, `group-<name>-<digest>`); None for a digest or a test."""
    if m.event in ("succeeded", "failed", "cancelled") and m.key.startswith("run-"):
        run_id, _, state = m.key[len("run-") :].rpartition("-")
        return ("run", run_id) if run_id and state in {s.value for s in RunState} else None
    if m.event == "group" and m.key.startswith("group-"):
        name = m.key[len("group-") :].rpartition("-")[0]
        return ("group", name) if name else None
    return None


@dataclass
class Built:
    png: bytes | None
    make: Callable[[str | None], dict[str, Any]]  # the card, given the image's key or None


def build(home: Home, profile: Profile, m: Message, web_url: str | None) -> Built:
    """What to send for `m`: its curves and its card, from the run or group as it is now (a
    finished run does not change); the message itself when that cannot be read."""
    subject = _subject(m)
    try:
        if subject is not None and subject[0] == "run":
            run = RunStore(home).load(subject[1])
            png = _png([run], declared=declared_of(home, run.group)[0])
            return Built(png, lambda key: run_card(home, run.id, image_key=key, web_url=web_url))
        if subject is not None and subject[0] == "group":
            group = subject[1]
            runs = group_runs(home, group)
            if runs:
                declared = declared_of(home, group)[0]
                o = resolve(finals(runs).values(), metric=profile.metric,
                            direction=profile.metric_direction, declared=declared,
                            group=group)  # fmt: skip
                png = _png(runs, metric=o.metric, maximize=o.maximize if o.direction else None,
                           declared=declared)  # fmt: skip

                def make(key: str | None) -> dict[str, Any]:
                    how = {"metric": profile.metric, "direction": profile.metric_direction}
                    return group_card(home, group, image_key=key, web_url=web_url, **how)

                return Built(png, make)
    except OrbitError as exc:  # removed or damaged since: the message says what it said
        log.info("%s: %s; sent as queued", m.key, exc)
    return Built(None, lambda key: message_card(m, key))


def _png(runs: list[Run], **how: Any) -> bytes | None:
    try:
        return curves.curves_png(runs, **how)
    except Exception:  # a drawing bug must not cost the card: it goes without its image
        log.exception("the curves of %s could not be drawn", ", ".join(r.id for r in runs[:3]))
        return None


def uuid_for(key: str, app_id: str, open_id: str) -> str:
    """The same (message, app, user) always gets the same uuid: a resend is a no-op."""
    digest = hashlib.sha256(f"{key}\n{app_id}\n{open_id}".encode()).hexdigest()
    return f"orbit-{digest[:40]}"


def fix_of(exc: LarkError) -> str:
    """The error, and for a refusal that only a change in Feishu's developer console mends
    (https://open.feishu.cn/app, the app), the page to fix."""
    hint = CONSOLE_FIX.get(exc.code)
    return f"{exc}: {hint}" if hint else str(exc)


@dataclass
class Sent:
    """One user's outcome."""

    open_id: str
    name: str
    ok: bool
    retry: bool
    detail: str  # the message id, or what went wrong
    limited: bool = False


def send_cards(
    lark: Lark, users: dict[str, dict[str, Any]], key: str, built: Built
) -> tuple[list[Sent], str | None]:
    """Upload the curves (once), then send the card to each user; each user's outcome and
    what happened to the image (None when it went, or there was none). Raises LarkError when
    no tenant token can be had: nothing can be sent then."""
    lark.token()
    image_key, image_note = None, None
    if built.png:
        try:
            image_key = lark.upload_image(built.png, "curves.png")
        except LarkError as exc:  # the card is worth more than its image: sent without it
            image_note = f"the curves were not uploaded ({fix_of(exc)})"
    content = built.make(image_key)
    out = []
    for open_id, who in users.items():
        name = str(who.get("name") or open_id)
        try:
            data = lark.send(open_id, "interactive", content, "open_id",
                             uuid_for(key, lark.app_id, open_id))  # fmt: skip
        except LarkError as exc:
            limited = exc.code in LIMITED_CODES
            out.append(Sent(open_id, name, False, exc.retry, fix_of(exc), limited))
            continue
        out.append(Sent(open_id, name, True, False, str(data.get("message_id") or "sent")))
    return out, image_note


def deliver(
    home: Home,
    profile: Profile,
    m: Message,
    *,
    lark: Lark | None = None,
    web_url: str | None = None,
) -> Verdict:
    """Send `m` to every user paired with the profile's bot. Sent when every user got it (or
    the others did and the rest refused for good); retried when a user's send failed for now
    (the uuids keep those who got it from getting it twice); given up when no user is paired
    (the card is dropped, said in the log: a bot paired later does not flood its user with
    old cards), for a refusal only the console mends (a wrong secret, a missing permission:
    the detail names the page), or when nobody could be reached for good."""
    try:
        users = load_users(home, profile.name).paired
    except CorruptError as exc:  # a person must mend it; retried until then
        return Verdict(False, True, str(exc))
    if not users:
        return Verdict(
            False,
            False,
            f"no paired users yet: dropped (message the bot, then `orbit notify pair "
            f"{profile.name} CODE`)",
        )
    lark = lark or lark_for(profile, str(home.root))
    built = build(home, profile, m, web_url)
    try:
        results, image_note = send_cards(lark, users, m.key, built)
    except LarkError as exc:
        return Verdict(False, exc.retry, fix_of(exc), limited=exc.code in LIMITED_CODES)
    return verdict_of(results, image_note)


def verdict_of(results: list[Sent], image_note: str | None) -> Verdict:
    ok = [r for r in results if r.ok]
    again = [r for r in results if not r.ok and r.retry]
    refused = [r for r in results if not r.ok and not r.retry]
    parts = []
    if ok:
        parts.append(f"sent to {', '.join(r.name for r in ok)}")
    parts.extend(f"{r.name}: {r.detail}" for r in again + refused)
    if image_note:
        parts.append(image_note)
    detail = "; ".join(parts)
    if again:
        return Verdict(False, True, detail, limited=any(r.limited for r in again))
    return Verdict(bool(ok), False, detail)


# --- orbit notify test ------------------------------------------------------------------------
def sample_png() -> bytes:
    """A sample run's curves (a loss falling, an accuracy rising) for `orbit notify test`."""
    xs = [float(i) for i in range(100)]
    loss = [2.0 * math.exp(-x / 25) + 0.05 * math.sin(x / 2) + 0.1 for x in xs]
    acc = [0.95 * (1 - math.exp(-x / 20)) for x in xs]
    panels = [
        curves.Panel("loss", [curves.Line("loss", xs, loss, loss[-1])], "step"),
        curves.Panel("accuracy", [curves.Line("accuracy", xs, acc, acc[-1])], "step"),
    ]
    return curves.draw(panels)


def sample_card(home: Home, profile: Profile, image_key: str | None) -> dict[str, Any]:
    elements: list[dict[str, Any]] = [
        _fields([("profile", profile.name), ("app", profile.app_id or "-")], 400),
        _text(f"home: {home.root}", 400),
        _text(
            "If you can read this, Orbit reaches you through this bot: finished runs and "
            "groups come as cards like this one, with their metric curves.",
            400,
        ),
    ]
    if image_key:
        elements.append(image(image_key, "sample metric curves"))
    return card(f"Orbit test card for profile {profile.name}", "succeeded", elements)


def send_test(home: Home, profile: Profile, *, lark: Lark | None = None) -> list[Sent]:
    """Send the sample card (with its curves) to each paired user now; each user's outcome.
    Raises LarkError when no token can be had, OrbitError when no user is paired."""
    users = load_users(home, profile.name).paired
    if not users:
        raise OrbitError(
            f"the bot {profile.name} has no paired users yet: message it in Feishu, then "
            f"`orbit notify pair {profile.name} CODE`"
        )
    lark = lark or lark_for(profile, str(home.root))
    key = f"test-{profile.name}-{time.time_ns()}"  # each test a new card
    built = Built(sample_png(), lambda image_key: sample_card(home, profile, image_key))
    try:
        results, _ = send_cards(lark, users, key, built)
    except LarkError as exc:
        hint = CONSOLE_FIX.get(exc.code)
        if hint:
            raise LarkError(str(exc), -1, hint, retry=exc.retry) from None
        raise
    return results
