"""Stand-in: the line the pre-launch check looks for (the sandbox timeout fix)."""


def is_os_sandbox_timeout(success: bool, log: str | None) -> bool:
    prefix = "OS sandbox agent execution timed out ("
    return not success and isinstance(log, str) and log.startswith(prefix) and log.endswith("s)")
