"""The one phrase every reader shows for a run whose log may lack lines (`orbit wait`,
`run -w`, `ps`, `show`, `logs`, notifications): "log incomplete: …".

Two causes are recorded in status.yaml: `log_incomplete` (the copier found that Docker
discarded output before it was copied: execute/logfollow.py) and `docker_unreachable` (the
shepherd saw Docker stop answering while the run ran; Docker's own log may have lost what the
program wrote meanwhile).
"""

from __future__ import annotations

from orbit.human import clock_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def outages(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The times Docker did not answer while the run ran: `{"from": ISO, "to": ISO}` each,
    without `to` while it still does not answer."""
    found = status.get("docker_unreachable")
    return [o for o in found if isinstance(o, dict)] if isinstance(found, list) else []


def log_note(status: Mapping[str, Any]) -> str | None:
    """ "log incomplete: 1 gap (…); Docker was not answering 12:03:05–12:03:25 (…)", or None
    when nothing says lines are missing."""
    parts = []
    gaps = status.get("log_incomplete")
    if isinstance(gaps, dict):
        count = gaps.get("gaps")
        plural = "" if count == 1 else "s"
        parts.append(f"{count} gap{plural} (Docker discarded output before it was copied)")
    spans = [
        f"{clock_time(o.get('from'))}–{clock_time(o['to'])}"
        if o.get("to")
        else f"since {clock_time(o.get('from'))}"
        for o in outages(status)
    ]
    if spans:
        parts.append(
            f"Docker was not answering {', '.join(spans)} (what the run wrote then may be missing)"
        )
    return f"log incomplete: {'; '.join(parts)}" if parts else None
