"""The Feishu bot's process: `python -m orbit.feishu.bot NAME` (store/feishu.py:bot_worker).

Its long connection comes with the next change; until then it says so in its log and exits.
"""

from __future__ import annotations

import logging

from orbit.detach import exit_from

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    import lark_oapi.ws  # the official SDK's long connection: only this process imports it

    log.warning("the Feishu bot %s is not built yet (%s)", argv[:1], lark_oapi.ws.__name__)
    return 1


if __name__ == "__main__":
    exit_from(main)
