"""Stand-in: the status decision of the fixed adapter (the exact timeout marker)."""

from ai4sci_bench.adapters.subprocess_base import is_os_sandbox_timeout


def status(success: bool, log: str) -> str:
    if is_os_sandbox_timeout(success, log):
        return "timeout"
    return "completed" if success else "failed"
