"""The record a harness module fills in: everything Orbit knows of one coding agent.

A harness module (orbit/harnesses/codex.py, claude_code.py, pi.py, dsh.py) holds data and pure
functions only; it imports the standard library, orbit.errors and this module. The code that
acts on that data lives in the layer that may act: the in-container setup and the login flows
in orbit/agents/incontainer.py, the transcript parsers in orbit/review/ (named here by module
path, a string tests/test_harnesses.py resolves), the plugin install in orbit/agents/plugin.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbit.errors import UsageError

AGENT = "/orbit/agent"  # inside a run's container: the agent's tools, home and config
SESSION = "session"  # the run directory's folder that gets the agent's transcripts


@dataclass(frozen=True)
class Access:
    """What a profile gives the agent: its kind and secret, as orbit/agents/auth.py keeps it."""

    kind: str
    key: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    base_url: str | None = None


@dataclass
class Plan:
    """What a harness adds to a run's container for a profile (orbit/agents/incontainer.py makes
    it real): plain variables, secret variables and files (in the run's private secrets
    folder), and mounts in the shape of orbit.execute.submit's."""

    env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)
    secret_files: dict[str, bytes] = field(default_factory=dict)
    mounts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Found:
    """A profile's parts as `orbit auth add --from-env` found them."""

    key: str | None = None
    source: str = "from-env"
    base_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


# command(prompt, model=, effort=, probe=): probe is `orbit auth test`'s one answer as plain
# text with nothing kept; otherwise the agent works unattended with every tool (a bench solve).
Command = Callable[..., list[str]]


@dataclass(frozen=True)
class Cli:
    """A harness whose CLI Orbit runs inside a run's container (`orbit run --auth`, bench
    methods). Its `id` names auth profiles and bench methods."""

    name: str  # the executable, on the host's PATH and on the container's
    package: str  # the npm package that installs it (said when it is missing)
    config_home: str  # the variable naming its config folder (CLAUDE_CONFIG_DIR)
    host_config: str  # that folder's default under $HOME (.claude)
    command: Command  # the one builder of its command line
    container: Callable[[Access, bool, str], Plan]  # (access, runs as root, workdir)
    from_environment: Callable[[str, Mapping[str, str]], Found]  # (kind, environ)
    # Its login flow (orbit/agents/incontainer.py log_in: auth-json, setup-token); None: a
    # `login` profile's secret is given like any other.
    login: str | None = None
    model_vars: tuple[str, ...] = ()  # non-secret settings --from-env carries over
    effort: bool = False  # takes a reasoning effort (bench `effort=`)
    asi_adapter: str | None = None  # ASI-Bench's adapter module for it

    def config_dir(self, environ: Mapping[str, str]) -> Path:
        """Its config folder on the host: the variable, else its default under HOME."""
        home = Path(environ.get("HOME") or Path.home())
        return Path(environ.get(self.config_home) or home / self.host_config)


@dataclass(frozen=True)
class Transcript:
    """How Orbit reads the harness's transcripts (orbit/review/conversation.py)."""

    format: str  # the format's name in `orbit session --json` and the web ("claude")
    parser: str  # the module with parse_line(builder, obj, line) and is_message(obj)
    claims: Callable[[dict[str, Any]], bool]  # whether a transcript's first JSON line is its
    claims_cut: Callable[[str, str], bool]  # (first "type", first line cut short): the same
    # Its parser also reads a transcript no harness claims (it keeps what it cannot read raw):
    # one harness says so.
    reads_unknown: bool = False


@dataclass(frozen=True)
class Skills:
    """Where `orbit plugin install` puts Orbit's skills for an agent, and its settings file
    when Orbit also installs hooks there."""

    dir: Path
    settings: Path | None = None


@dataclass(frozen=True)
class Harness:
    id: str  # auth profiles, bench methods, the ORBIT_HARNESS of a session
    display: str  # what people read ("Claude Code")
    plugin: str  # `orbit plugin install NAME`
    skills: Callable[[Mapping[str, str], str | None], Skills]  # (environ, --profile)
    markers: tuple[str, ...] = ()  # variables it sets in the shells it runs (note authors)
    hook_fragment: str | None = None  # its settings fragment in orbit/hooks/
    profiles: bool = False  # it has profiles of its own (`orbit plugin --profile`)
    check_install: Callable[[str | None, Mapping[str, str]], None] | None = None
    cli: Cli | None = None  # None: a host-only agent Orbit installs skills for
    transcript: Transcript | None = None
    # Where it reads user MCP servers (`orbit plugin install` registers `orbit mcp` there):
    # a JSON file with `mcpServers`, or a TOML file with `[mcp_servers.NAME]` tables.
    mcp_config: Callable[[Mapping[str, str]], Path] | None = None

    @property
    def plugin_help(self) -> str:
        """The plugin name as `orbit plugin --help` lists it: with the display name when
        that says more than the name."""
        same = self.display.lower() == self.plugin
        return self.plugin if same else f"{self.plugin} ({self.display})"


def spoken(words: list[str], last: str = "and") -> str:
    """Words as a sentence lists them: "a, b and c"."""
    return ", ".join(words[:-1]) + f" {last} " + words[-1] if len(words) > 1 else "".join(words)


def home_of(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def shared_skills(environ: Mapping[str, str], profile: str | None) -> Skills:
    """~/.agents/skills, the folder Codex, pi and dsh all read."""
    return Skills(home_of(environ) / ".agents" / "skills")


def first_set(keys: tuple[str, ...], found: Mapping[str, str], into: Found) -> Found:
    """`into` with the secret of the first of `keys` set in `found`; UsageError when none is."""
    for var in keys:
        if found.get(var):
            into.key = found[var].strip()
            into.source = f"from-env:{var}"
            return into
    raise UsageError(f"--from-env: none of {', '.join(keys)} is set (nor in Claude's settings)")
