"""An agent CLI inside a run's container (`orbit run --auth NAME -- claude -p …`).

The CLI installed on the host is mounted read-only, with Node.js when it is a Node script:
the outermost `node_modules` folder above the executable (or the executable's own folder, for
a native install) appears at /orbit/agent/tools/<harness>, and /orbit/agent/bin holds links
named after the CLI (`claude`, `codex`; and `node`) to it, first on PATH. The profile's
credentials go into the environment or the run's private secrets folder, never into the run's
files, and each CLI is told not to pass them on to the commands the agent runs. The agent's
home is a private tmpfs; its transcripts are written straight into the run directory's
`session/`. What each harness needs for this (its variables, config folder, where its
transcripts go) is its module's `container` plan (orbit/harnesses/); this module makes it real.

The container runs as the submitting user, as every run does; each harness's plan is told
whether that is root (Claude Code then needs IS_SANDBOX=1 before it skips permissions).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from orbit import harnesses
from orbit.agents.auth import Profile, private_dir
from orbit.errors import UsageError
from orbit.execute.submit import InContainer
from orbit.harnesses.base import AGENT, SESSION, Access
from orbit.store.home import Home
from orbit.store.secrets import Secrets

BIN = f"{AGENT}/bin"
HOME_DIR = f"{AGENT}/home"
NODE = f"{AGENT}/node/bin/node"
VERSION_TIMEOUT_S = 20.0


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
    cli = harnesses.cli_of(harness)
    name = cli.name
    found = shutil.which(name, path=environ.get("PATH") or os.defpath)
    if found is None:
        raise UsageError(
            f"`{name}` is not installed on this machine (not on PATH): install it first, "
            f"e.g. `npm install -g {cli.package}`; Orbit mounts it into the container"
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
    env = {**environ, "HOME": str(scratch)}
    env.update({h.config_home: str(scratch) for h in map(harnesses.cli_of, harnesses.ids())})
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
    `workdir` (where a transcript goes may depend on it)."""
    cli = locate(profile.harness, environ)
    links = {harnesses.cli_of(profile.harness).name: cli.inside}
    mounts: list[dict[str, Any]] = [
        {"source": str(cli.root), "target": cli.tools},
        {"tmpfs": True, "target": HOME_DIR},
    ]
    if cli.node is not None:
        links["node"] = NODE
        mounts.append({"source": str(cli.node), "target": NODE})
    mounts.append({"source": str(bin_dir(home, links)), "target": BIN})
    access = Access(profile.kind, profile.key, profile.files, profile.base_url)
    plan = harnesses.cli_of(profile.harness).container(access, container_root, workdir)
    secrets = Secrets(redact=profile.secret_strings())
    secrets.env.update(plan.secret_env)
    secrets.files.update(plan.secret_files)
    record = {
        "profile": profile.name,
        "harness": profile.harness,
        "kind": profile.kind,
        "cli": {"path": str(cli.exe), "version": version(cli, environ, home)},
    }
    return InContainer(
        record=record,
        env={"HOME": HOME_DIR, **profile.env, **plan.env},
        secrets=secrets,
        mounts=[*mounts, *plan.mounts],
        path=[BIN],
        run_dirs=[SESSION],
        host_network=profile.host_network,
    )


# --- login flows, on the host, in a private home --------------------------------------------
OAUTH_TOKEN = re.compile(r"sk-ant-oat\d\d-[A-Za-z0-9_\-]{20,}")


def log_in(
    home: Home, profile: Profile, key: str | None, environ: Mapping[str, str], out: IO[str]
) -> bool:
    """Run the login flow of a `login` profile's harness, when it has one for what was given,
    and put its secret and source in `profile`; whether it ran. `auth-json` (Codex) keeps the
    login as the auth.json its own flow writes in a private home (a given key is an access
    token for it); `setup-token` (Claude Code) takes the token its browser flow prints, unless
    one was given."""
    cli = harnesses.cli_of(profile.harness)
    if profile.kind != "login":
        return False
    if cli.login == "auth-json":
        profile.files = {"auth.json": auth_json_login(profile.harness, home, environ, key)}
        how = f"({profile.source})" if key else "--device-auth"
        profile.source = f"{cli.name} login {how}"
        return True
    if cli.login == "setup-token" and key is None:
        profile.key = setup_token_login(profile.harness, home, environ, out)
        profile.source = f"{cli.name} setup-token"
        return True
    return False


def setup_token_login(harness: str, home: Home, environ: Mapping[str, str], out: IO[str]) -> str:
    """Run `<cli> setup-token` (its browser flow) and take the token it prints; the output is
    shown as it comes, the token itself masked."""
    cli = locate(harness, environ)
    name, config_home = harnesses.cli_of(harness).name, harnesses.cli_of(harness).config_home
    scratch = private_dir(home)
    try:
        proc = subprocess.Popen(
            [str(cli.exe), "setup-token"],
            stdout=subprocess.PIPE,
            text=True,
            env={**environ, config_home: str(scratch)},
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
        raise UsageError(f"cannot run `{name} setup-token`: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if token is None:
        raise UsageError(
            f"`{name} setup-token` printed no token; run it yourself and paste the token with "
            "--key-stdin"
        )
    return token


def auth_json_login(
    harness: str, home: Home, environ: Mapping[str, str], access_token: str | None
) -> str:
    """The CLI's own login in a private config home — the device-code flow, or
    `--with-access-token` when a token is given — and the auth.json it wrote."""
    cli = locate(harness, environ)
    name, config_home = harnesses.cli_of(harness).name, harnesses.cli_of(harness).config_home
    scratch = private_dir(home)
    args = ["login", "--with-access-token"] if access_token else ["login", "--device-auth"]
    try:  # the device flow talks to the person; a token's answer is read, to be shown
        proc = subprocess.run(
            [str(cli.exe), *args],
            input=f"{access_token}\n" if access_token else None,
            capture_output=bool(access_token),
            text=True,
            env={**environ, config_home: str(scratch)},
        )
        written = (scratch / "auth.json").read_text() if proc.returncode == 0 else None
    except OSError as exc:
        raise UsageError(f"`{name} {' '.join(args)}` failed: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not written:
        said = (proc.stderr or "").strip().splitlines()
        why = f": {said[-1][:200]}" if said else ""
        raise UsageError(f"`{name} {' '.join(args)}` did not log in (exit {proc.returncode}){why}")
    return written
