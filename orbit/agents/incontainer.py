"""An agent CLI inside a run's container (`orbit run --auth NAME -- claude -p …`).

The CLI installed on the host is mounted read-only, with Node.js when it is a Node script:
the outermost `node_modules` folder above the executable (or the executable's own folder, for
a native install) appears at /orbit/agent/tools/<harness>, and /orbit/agent/bin holds links
named `claude` / `codex` (and `node`) to it, first on PATH. The profile's credentials go into
the environment (or, for a Codex login, its auth.json into the run's private secrets folder),
never into the run's files, and each CLI is told not to pass them on to the commands the agent
runs. The agent's home is a private tmpfs; its transcripts are written straight into the run
directory's `session/`:

    Claude Code  CLAUDE_CONFIG_DIR=/orbit/agent/claude, session/ mounted at its
                 projects/-workspace (the project folder of an agent working in /workspace)
    Codex        CODEX_HOME=/orbit/agent/codex (the run's secrets folder), session/ mounted at
                 its sessions/

The container runs as the submitting user, as every run does; when that is root, Claude Code
is told it is in a sandbox (IS_SANDBOX=1), which it requires before skipping permissions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from orbit.agents.auth import Profile, private_dir
from orbit.errors import UsageError
from orbit.execute.submit import InContainer
from orbit.store.home import Home
from orbit.store.secrets import Secrets

CLI_NAMES = {"claude-code": "claude", "codex": "codex"}
AGENT = "/orbit/agent"
BIN = f"{AGENT}/bin"
HOME_DIR = f"{AGENT}/home"
NODE = f"{AGENT}/node/bin/node"
CLAUDE_DIR = f"{AGENT}/claude"
CODEX_DIR = f"{AGENT}/codex"
SESSION = "session"
VERSION_TIMEOUT_S = 20.0
CODEX_CONFIG = """\
# Written by Orbit for this run (docs/agents.md): the agent's shell commands do not inherit
# variables named *KEY*, *SECRET* or *TOKEN* (its credentials among them).
[shell_environment_policy]
ignore_default_excludes = false
"""


@dataclass
class HostCli:
    harness: str
    exe: Path  # the executable, symbolic links resolved
    root: Path  # the folder mounted at /orbit/agent/tools/<harness>
    node: Path | None  # the host's Node.js, when the executable is a Node script

    @property
    def tools(self) -> str:
        return f"{AGENT}/tools/{self.harness}"

    @property
    def inside(self) -> str:
        """The executable's path inside the container."""
        return f"{self.tools}/{self.exe.relative_to(self.root).as_posix()}"


def locate(harness: str, environ: Mapping[str, str]) -> HostCli:
    """The host's CLI for `harness`, from this environment's PATH."""
    name = CLI_NAMES[harness]
    found = shutil.which(name, path=environ.get("PATH") or os.defpath)
    if found is None:
        raise UsageError(
            f"`{name}` is not installed on this machine (not on PATH): install it first, "
            f"e.g. `npm install -g {_package(harness)}`; Orbit mounts it into the container"
        )
    exe = Path(found).resolve()
    root = exe.parent
    for parent in exe.parents:  # the outermost node_modules: the package and its dependencies
        if parent.name == "node_modules":
            root = parent
    node = None
    if _is_node_script(exe):
        node_path = shutil.which("node", path=environ.get("PATH") or os.defpath)
        if node_path is None:
            raise UsageError(f"`{name}` ({exe}) is a Node.js script and `node` is not on PATH")
        node = Path(node_path).resolve()
    return HostCli(harness, exe, root, node)


def project_folder(workdir: str) -> str:
    """The folder Claude Code keeps the transcripts of an agent working in `workdir` under: the
    path with every character that is not a letter or digit replaced by "-" (/workspace →
    -workspace)."""
    return re.sub(r"[^A-Za-z0-9]", "-", workdir)


def _package(harness: str) -> str:
    return {"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex"}[harness]


def _is_node_script(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            first = fh.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"node" in first


def version(cli: HostCli, environ: Mapping[str, str], home: Home) -> str | None:
    """`<cli> --version` on the host, in a throw-away home (Codex writes into its home even
    for that); None when it does not answer."""
    scratch = private_dir(home)
    env = {**environ, "HOME": str(scratch), "CODEX_HOME": str(scratch)}
    env["CLAUDE_CONFIG_DIR"] = str(scratch)
    try:
        proc = subprocess.run(
            [str(cli.exe), "--version"],
            capture_output=True,
            text=True,
            env=env,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lines = proc.stdout.strip().splitlines()
    return lines[0][:100] if proc.returncode == 0 and lines else None


def bin_dir(home: Home, links: dict[str, str]) -> Path:
    """A folder of symbolic links `name → container path`, shared by every run that needs the
    same links (named by their hash, made once, never changed)."""
    key = hashlib.sha256(repr(sorted(links.items())).encode()).hexdigest()[:16]
    path = home.runtime_dir / "agent-bin" / key
    if path.is_dir():
        return path
    staging = path.with_name(f".{key}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, target in links.items():
        os.symlink(target, staging / name)
    try:
        os.rename(staging, path)
    except OSError:  # made meanwhile by another submit
        shutil.rmtree(staging, ignore_errors=True)
    return path


def setup(
    home: Home,
    profile: Profile,
    environ: Mapping[str, str],
    *,
    container_root: bool,
    workdir: str = "/workspace",
) -> InContainer:
    """Everything a run needs to run `profile`'s agent CLI inside its container, working in
    `workdir` (where Claude Code's transcript of it goes depends on it)."""
    cli = locate(profile.harness, environ)
    links = {CLI_NAMES[profile.harness]: cli.inside}
    mounts: list[dict[str, Any]] = [
        {"source": str(cli.root), "target": cli.tools},
        {"tmpfs": True, "target": HOME_DIR},
    ]
    if cli.node is not None:
        links["node"] = NODE
        mounts.append({"source": str(cli.node), "target": NODE})
    mounts.append({"source": str(bin_dir(home, links)), "target": BIN})
    env = {"HOME": HOME_DIR, **profile.env}
    secrets = Secrets(redact=profile.secret_strings())
    if profile.harness == "claude-code":
        _claude(profile, env, secrets, mounts, container_root, project_folder(workdir))
    else:
        _codex(profile, env, secrets, mounts)
    record = {
        "profile": profile.name,
        "harness": profile.harness,
        "kind": profile.kind,
        "cli": {"path": str(cli.exe), "version": version(cli, environ, home)},
    }
    return InContainer(
        record=record,
        env=env,
        secrets=secrets,
        mounts=mounts,
        path=[BIN],
        run_dirs=[SESSION],
        host_network=profile.host_network,
    )


def _claude(
    profile: Profile,
    env: dict[str, str],
    secrets: Secrets,
    mounts: list[dict[str, Any]],
    container_root: bool,
    project: str,
) -> None:
    env.update(
        CLAUDE_CONFIG_DIR=CLAUDE_DIR,
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # The agent's Bash commands, hooks and MCP servers do not get its credentials.
        CLAUDE_CODE_SUBPROCESS_ENV_SCRUB="1",
    )
    if container_root:
        env["IS_SANDBOX"] = "1"
    if profile.base_url:
        env["ANTHROPIC_BASE_URL"] = profile.base_url
    var = {
        "api-key": "ANTHROPIC_API_KEY",
        "login": "CLAUDE_CODE_OAUTH_TOKEN",
        "relay": "ANTHROPIC_AUTH_TOKEN",
    }[profile.kind]
    secrets.env[var] = profile.key or ""
    mounts.append({"tmpfs": True, "target": CLAUDE_DIR})
    mounts.append({"run_dir": SESSION, "target": f"{CLAUDE_DIR}/projects/{project}", "rw": True})


def _codex(
    profile: Profile, env: dict[str, str], secrets: Secrets, mounts: list[dict[str, Any]]
) -> None:
    env["CODEX_HOME"] = CODEX_DIR
    # CODEX_HOME is the run's private secrets folder: Codex may rewrite a login's auth.json
    # (a refresh) there, and it goes when the run finishes. Its config keeps variables named
    # *KEY*, *SECRET*, *TOKEN* out of the shell commands the agent runs, and names a relay:
    # Codex reads the address from its config only (not from OPENAI_BASE_URL).
    config = CODEX_CONFIG
    if profile.base_url:
        config = f"openai_base_url = {json.dumps(profile.base_url)}\n\n{config}"
    secrets.files["config.toml"] = config.encode()
    if profile.files:  # a login: its auth.json
        secrets.files.update({k: v.encode() for k, v in profile.files.items()})
    else:  # `codex exec` sends CODEX_API_KEY (not OPENAI_API_KEY)
        secrets.env["CODEX_API_KEY"] = profile.key or ""
    mounts.append({"secrets": True, "target": CODEX_DIR, "rw": True})
    mounts.append({"run_dir": SESSION, "target": f"{CODEX_DIR}/sessions", "rw": True})


# --- login flows, on the host, in a private home --------------------------------------------
OAUTH_TOKEN = re.compile(r"sk-ant-oat\d\d-[A-Za-z0-9_\-]{20,}")


def claude_setup_token(home: Home, environ: Mapping[str, str], out: IO[str]) -> str:
    """Run `claude setup-token` (its browser flow) and take the token it prints; the output is
    shown as it comes, the token itself masked."""
    cli = locate("claude-code", environ)
    scratch = private_dir(home)
    try:
        proc = subprocess.Popen(
            [str(cli.exe), "setup-token"],
            stdout=subprocess.PIPE,
            text=True,
            env={**environ, "CLAUDE_CONFIG_DIR": str(scratch)},
        )
        assert proc.stdout is not None
        token = None
        for line in proc.stdout:
            match = OAUTH_TOKEN.search(line)
            if match:
                token = match.group(0)
                line = line.replace(token, "[token received]")
            out.write(line)
            out.flush()
        proc.wait()
    except OSError as exc:
        raise UsageError(f"cannot run `claude setup-token`: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if token is None:
        raise UsageError(
            "`claude setup-token` printed no token; run it yourself and paste the token with "
            "--key-stdin"
        )
    return token


def codex_login(home: Home, environ: Mapping[str, str], access_token: str | None) -> str:
    """Codex's own login in a private CODEX_HOME — the device-code flow, or
    `--with-access-token` when a token is given — and the auth.json it wrote."""
    cli = locate("codex", environ)
    scratch = private_dir(home)
    args = ["login", "--with-access-token"] if access_token else ["login", "--device-auth"]
    try:  # the device flow talks to the person; a token's answer is read, to be shown
        proc = subprocess.run(
            [str(cli.exe), *args],
            input=f"{access_token}\n" if access_token else None,
            capture_output=bool(access_token),
            text=True,
            env={**environ, "CODEX_HOME": str(scratch)},
        )
        written = (scratch / "auth.json").read_text() if proc.returncode == 0 else None
    except OSError as exc:
        raise UsageError(f"`codex {' '.join(args)}` failed: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not written:
        said = (proc.stderr or "").strip().splitlines()
        why = f": {said[-1][:200]}" if said else ""
        raise UsageError(f"`codex {' '.join(args)}` did not log in (exit {proc.returncode}){why}")
    return written
