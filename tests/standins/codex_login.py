"""The codex stand-in's common errors, CODEX_HOME, and `codex login`/`logout` (auth.json)."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from standin_common import (
    uuid7,
    write_private,
)

VERSION = "0.171.0"


class Fail(Exception):
    """An error for stderr with the exit code the real CLI uses."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def clap_error(arg: str, usage: str) -> Fail:
    return Fail(
        f"error: unexpected argument '{arg}' found\n\n"
        f"  tip: to pass '{arg}' as a value, use '-- {arg}'\n\n"
        f"{usage}\n\nFor more information, try '--help'.",
        2,
    )


def codex_home(strict: bool) -> Path:
    """$CODEX_HOME (which must exist) or ~/.codex (created); `tmp/` inside, as the real CLI."""
    configured = os.environ.get("CODEX_HOME")
    home = Path(configured) if configured else Path.home() / ".codex"
    if configured and not home.is_dir():
        message = f'CODEX_HOME points to "{configured}", but that path does not exist'
        if strict:
            raise Fail(f"Error loading configuration: {message}")
        print(
            f"WARNING: proceeding, even though we could not create PATH aliases: {message}",
            file=sys.stderr,
        )
        return home
    try:
        (home / "tmp").mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    return home


# --- login ------------------------------------------------------------------------------------


def fake_jwt(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.{secrets.token_urlsafe(32)}"


def login(args: list[str]) -> int:
    home = codex_home(strict=True)
    auth_path = home / "auth.json"
    if args[:1] == ["status"]:
        return login_status(auth_path)
    if args[:1] == ["--with-api-key"]:
        print("Reading API key from stdin...", file=sys.stderr)
        key = sys.stdin.read().strip()
        if not key:
            raise Fail("No API key provided via stdin.")
        write_private(
            auth_path, json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": key}, indent=2)
        )
        print("API key saved. Authentication is checked when you send a request.", file=sys.stderr)
        return 0
    if args[:1] == ["--with-access-token"]:
        return login_with_access_token(auth_path)
    if not args:
        raise Fail(
            "stand-in: the browser login is not supported; use --device-auth or --with-api-key"
        )
    if args[:1] != ["--device-auth"] or len(args) > 1:
        raise clap_error(args[0] if args else "login", "Usage: codex login [OPTIONS] [COMMAND]")
    code = "-".join(secrets.token_hex(2).upper() for _ in range(2))
    print(f"\nWelcome to Codex [v{VERSION}]\nOpenAI's command-line coding agent\n")
    print("Follow these steps to sign in with ChatGPT using device code authorization:\n")
    print("1. Open this link in your browser and sign in to your account")
    print("   https://auth.openai.com/codex/device\n")
    print("2. Enter this one-time code (expires in 15 minutes)")
    print(f"   {code}\n")
    print("Device codes are a common phishing target. Never share this code.\n", flush=True)
    account = str(uuid7())
    claims = {
        "email": "standin@example.com",
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": "plus",
            "chatgpt_account_id": account,
        },
        "exp": int(time.time()) + 10 * 24 * 3600,
    }
    auth = {
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {
            "id_token": fake_jwt(claims),
            "access_token": fake_jwt({**claims, "scp": ["openid"]}),
            "refresh_token": "rt_" + secrets.token_urlsafe(48),
            "account_id": account,
        },
        "last_refresh": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    write_private(auth_path, json.dumps(auth, indent=2))
    print("Successfully logged in", file=sys.stderr)
    return 0


def login_with_access_token(auth_path: Path) -> int:
    """`printenv CODEX_ACCESS_TOKEN | codex login --with-access-token`: the real 0.171 refuses a
    token that is not a JWT with this message (checked); what it stores for a good one is not
    known here, so the stand-in keeps the token as a ChatGPT login's access token."""
    print("Reading access token from stdin...", file=sys.stderr)
    token = sys.stdin.read().strip()
    if len(token.split(".")) != 3 or not all(token.split(".")):
        raise Fail(
            "Error logging in with access token: failed to decode agent identity JWT: "
            "invalid agent identity JWT format"
        )
    auth = {
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {"id_token": token, "access_token": token, "refresh_token": "", "account_id": ""},
        "last_refresh": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    write_private(auth_path, json.dumps(auth, indent=2))
    print("Successfully logged in", file=sys.stderr)
    return 0


def read_auth(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def login_status(path: Path) -> int:
    auth = read_auth(path)
    if auth and auth.get("OPENAI_API_KEY"):
        key = str(auth["OPENAI_API_KEY"])
        masked = f"{key[:8]}***{key[-5:]}" if len(key) > 13 else "***"
        print(f"API key configured - {masked}", file=sys.stderr)
        print("Authentication is checked when you send a request.", file=sys.stderr)
        return 0
    if auth and (auth.get("tokens") or {}).get("access_token"):
        print("Logged in using ChatGPT", file=sys.stderr)
        return 0
    print("Not logged in", file=sys.stderr)
    return 1


def logout(home: Path) -> int:
    try:
        (home / "auth.json").unlink()
    except FileNotFoundError:
        print("Not logged in", file=sys.stderr)
        return 0
    print("Successfully logged out", file=sys.stderr)
    return 0
