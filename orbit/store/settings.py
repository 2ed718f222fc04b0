"""The settings a user may put in config.yaml, declared once.

Each setting is one class attribute of `Settings`: its annotation is the type its readers get
(mypy checks them: `home.settings.default_cpus` is a float), and its value a `Setting` that
holds what it accepts (a `Kind`: number, flag, text, choice, list), its default, whether `null`
may be written, the doc topic it belongs to and its text for people. From these come the check
of config.yaml (`check_setting`), `orbit config`'s keys, help and completion, and
docs/configuration.md's table (`markdown_table`; `python scripts/settings_table.py` writes it,
tests/test_settings.py fails when the doc and the schema differ).

The shepherd imports this (through store/home.py) under `python -S`: plain classes with
`__slots__`, no dataclasses or typing at run time (orbit/record.py says why).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any


class Kind:
    """What values a setting takes: `phrase` says it as the error messages do."""

    __slots__ = ("annotation", "phrase")

    def __init__(self, phrase: str, annotation: str) -> None:
        self.phrase = phrase
        self.annotation = annotation  # the type readers get, as Settings annotates it

    def valid(self, value: Any) -> bool:
        raise NotImplementedError

    def problem(self, key: str, value: Any) -> str | None:
        return None if self.valid(value) else f"{key} must be {self.phrase}, got {value!r}"

    def convert(self, value: Any) -> Any:
        return value

    @property
    def accepts(self) -> str:
        """The phrase as the docs' table shows it (Markdown)."""
        return self.phrase


class Number(Kind):
    """A number above `low` (or at least it, `inclusive`); `whole`: an int. true and false are
    not numbers here, though Python counts them as ints."""

    __slots__ = ("inclusive", "low", "whole")

    def __init__(self, low: float, *, inclusive: bool = False, whole: bool = False) -> None:
        op = "≥" if inclusive else ">"
        if whole:
            phrase = f"a whole number {op} {low:g}"
        else:
            phrase = "a positive number" if low == 0 and not inclusive else f"a number {op} {low:g}"
        super().__init__(phrase, "int" if whole else "float")
        self.low, self.inclusive, self.whole = low, inclusive, whole

    def valid(self, value: Any) -> bool:
        kinds = int if self.whole else int | float
        if not isinstance(value, kinds) or isinstance(value, bool):
            return False
        return value >= self.low if self.inclusive else value > self.low

    def convert(self, value: Any) -> Any:
        return int(value) if self.whole else float(value)


class Flag(Kind):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("true or false", "bool")

    def valid(self, value: Any) -> bool:
        return isinstance(value, bool)

    @property
    def accepts(self) -> str:
        return "`true` or `false`"


class Text(Kind):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("a non-empty string", "str")

    def valid(self, value: Any) -> bool:
        return isinstance(value, str) and bool(value)

    def problem(self, key: str, value: Any) -> str | None:
        return None if self.valid(value) else f"{key} must be {self.phrase}"


class Choice(Kind):
    __slots__ = ("choices",)

    def __init__(self, *choices: str) -> None:
        super().__init__(" or ".join(choices), "str")
        self.choices = choices

    def valid(self, value: Any) -> bool:
        return value in self.choices

    @property
    def accepts(self) -> str:
        return " or ".join(f"`{c}`" for c in self.choices)


class ListOf(Kind):
    """A YAML list whose items are each valid for `item`; readers get a tuple."""

    __slots__ = ("item",)

    def __init__(self, item: Kind, what: str) -> None:
        super().__init__(f"a list of {what}", f"tuple[{item.annotation}, ...]")
        self.item = item

    def valid(self, value: Any) -> bool:
        return isinstance(value, list) and all(self.item.valid(v) for v in value)

    def convert(self, value: Any) -> Any:
        return tuple(self.item.convert(v) for v in value)


class Setting:
    """One setting's declaration. `nullable`: `null` may be written for it (and, like an
    absent key, means the default); `null_means` says what a default of null stands for;
    `topic` is the doc (and anchor) that tells more; `help` is one line for `orbit config set`
    and completion; `doc` is its Meaning in docs/configuration.md."""

    __slots__ = ("default", "doc", "help", "kind", "name", "null_means", "nullable", "topic")

    def __init__(
        self,
        kind: Kind,
        default: Any,
        *,
        help: str,
        doc: str,
        nullable: bool = False,
        null_means: str = "",
        topic: str = "",
    ) -> None:
        self.name = ""  # set by __set_name__ when Settings is made
        self.kind, self.default, self.nullable = kind, default, nullable
        self.help, self.doc, self.null_means, self.topic = help, doc, null_means, topic

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def problem(self, value: Any) -> str | None:
        """Why `value` cannot be written for this setting, or None."""
        if value is None and self.nullable:
            return None
        return self.kind.problem(self.name, value)

    def typed(self, value: Any) -> Any:
        """What readers get for a checked `value` (None, as written or absent: the default)."""
        value = self.default if value is None else value
        return None if value is None else self.kind.convert(value)

    @property
    def annotation(self) -> str:
        return self.kind.annotation + (" | None" if self.default is None else "")

    @property
    def default_text(self) -> str:
        """The default as config.yaml would say it (`null`, `true`, `4.0`, `local`)."""
        if self.default is None or isinstance(self.default, bool):
            return {None: "null", True: "true", False: "false"}[self.default]
        return str(self.default)


def declare(kind: Kind, default: Any, **about: Any) -> Any:
    """A Setting, typed Any so that a Settings attribute can be annotated with its reader's
    type (the instance attribute of the same name holds the value)."""
    return Setting(kind, default, **about)


POSITIVE = Number(0)
AT_LEAST_0 = Number(0, inclusive=True)
TEXT = Text()


class Settings:
    """The settings of one home, each attribute typed as annotated: as written in config.yaml
    (checked), else the default. Cannot change: a changed file is read into a new one."""

    # --- where and how runs are made
    data_dir: str | None = declare(
        TEXT,
        None,
        nullable=True,
        null_means="`ORBIT_HOME`",
        help="where runs/ and snapshots/ live; ORBIT_DATA overrides",
        doc="where `runs/` and `snapshots/` live. Change it with `orbit config data DIR`, not by "
        "hand, so they move with it. `ORBIT_DATA` overrides it",
        topic="configuration.md#moving-the-data-directory",
    )
    default_image: str | None = declare(
        TEXT,
        None,
        nullable=True,
        help="used when `orbit run` has neither --image nor --dockerfile",
        doc="the image of `orbit run` without `--image` or `--dockerfile`",
    )
    default_cpus: float = declare(
        POSITIVE,
        4.0,
        help="CPUs of a run without --cpus, clamped to the machine's CPUs",
        doc="CPUs of a run without `--cpus`, capped at the machine's CPUs (not in a Slurm home)",
    )
    default_mem_gb: float = declare(
        POSITIVE,
        16.0,
        help="GiB of memory of a run without --mem, clamped to the machine's memory",
        doc="memory in GiB of a run without `--mem`, capped at the machine's memory (not in a "
        "Slurm home)",
    )
    total_cpus: float | None = declare(
        POSITIVE,
        None,
        nullable=True,
        null_means="the number of logical CPUs, from psutil",
        help="override psutil's count of schedulable CPUs",
        doc="how many CPUs the scheduler may lease; also the cap for the default and for "
        "requests (and one run never gets more than the machine's CPUs, which Docker refuses). "
        "`orbit config set` refuses more than the machine has; a larger value written by hand "
        "lets leases add up to more than the machine (`orbit doctor` warns)",
    )
    total_mem_gb: float | None = declare(
        POSITIVE,
        None,
        nullable=True,
        null_means="total physical memory, from psutil",
        help="override psutil's total memory",
        doc="how much memory in GiB the scheduler may lease; also the cap for the default and "
        "for requests. `orbit config set` refuses more than the machine has (`orbit doctor` "
        "warns about a larger value in the file)",
    )
    snapshot_max_mb: float = declare(
        POSITIVE,
        500,
        help="refuse larger code snapshots (put data in mounts)",
        doc="the largest code snapshot, in MiB of file content; larger projects are refused "
        "(put data and weights in `.gitignore` and mount them: a named dataset with `orbit data "
        "add` and `-d NAME`, any path with `-m`; or use `--no-snapshot`)",
    )
    pull_timeout_s: float = declare(
        POSITIVE,
        120,
        help="give up pulling a missing image after this long",
        doc="the deadline, in seconds, for pulling an image that is not present locally; when "
        "the pull has not finished by then, `orbit run` fails with exit 4 (`image not found: "
        "IMAGE (not local, and pull failed: no result within 120 s)`)",
    )
    scheduler_interval_s: float = declare(
        POSITIVE,
        30,
        help="seconds between ticks of the systemd timer and `scheduler run`",
        doc="seconds between ticks of the systemd timer (taken when `orbit scheduler install "
        "--systemd` writes the timer) and of `orbit scheduler run` (read when it starts); "
        "`--interval` overrides it. Below 1 s it passes the check but is refused by `orbit "
        "scheduler run` and `install`",
        topic="supervisor.md",
    )
    pids_limit: int = declare(
        Number(0, whole=True),
        4096,
        help="most processes (and threads) one container may have at once",
        doc="the most processes and threads one run's container may have at once (Docker's "
        "`--pids-limit`, read when the container is created). A fork bomb then fails inside its "
        "run (`fork: Resource temporarily unavailable` in its log) instead of using up the "
        "machine's process table; raise it for a run that really needs more",
    )
    docker_log_mb: int = declare(
        Number(3, inclusive=True, whole=True),
        150,
        help="MiB of a container's output Docker keeps (3 files) for its shepherd",
        doc="MiB of a run's output that Docker keeps for it, in 3 files of a third each "
        "(Docker's json-file `max-size`, `max-file: 3`; read when the container is created; in "
        "Docker's data root, removed with the container). It is what a new shepherd can still "
        "copy after its predecessor died: output written beyond it meanwhile is lost and said "
        "(`log incomplete: …`). Smaller saves Docker's disk, larger loses less under a fast "
        "writer",
        topic="architecture.md#logs",
    )
    # --- scheduling
    count_outside_use: bool = declare(
        Flag(),
        True,
        help="subtract CPU/memory used outside Orbit from what it leases",
        doc="subtract CPU and memory used outside Orbit from what the scheduler leases; `false` "
        "for a machine dedicated to Orbit",
        topic="scheduling.md#use-outside-orbit",
    )
    outside_cpu_min: float = declare(
        AT_LEAST_0,
        0.5,
        help="cores of outside CPU use that are ignored (noise)",
        doc="cores of outside CPU use that are ignored as noise (the floor is the larger of "
        "this and the CPUs `total_cpus` leaves outside Orbit)",
        topic="scheduling.md#use-outside-orbit",
    )
    outside_mem_min_gb: float = declare(
        AT_LEAST_0,
        1.0,
        help="GiB of outside memory use that are ignored",
        doc="GiB of outside memory use that are ignored (the floor is the larger of this and "
        "the memory `total_mem_gb` leaves outside Orbit)",
        topic="scheduling.md#use-outside-orbit",
    )
    reserve_after_s: float = declare(
        POSITIVE,
        300,
        help="a run waiting longer reserves resources against backfill",
        doc="a queued run that has waited this many seconds (since submit) and still does not "
        "fit reserves what it needs against later, smaller runs",
        topic="scheduling.md#admission-order",
    )
    # --- GPUs
    fake_gpus: str | None = declare(
        TEXT,
        None,
        nullable=True,
        help="path of a YAML stand-in for NVML; ORBIT_FAKE_GPUS overrides",
        doc="path of the YAML stand-in for NVML (`~` is expanded); `ORBIT_FAKE_GPUS` overrides it",
        topic="gpus.md#trying-orbit-without-gpus-the-stand-in",
    )
    allowed_gpus: tuple[int, ...] | None = declare(
        ListOf(Number(0, inclusive=True, whole=True), "GPU indices"),
        None,
        nullable=True,
        null_means="all",
        help="GPU indices Orbit may use, e.g. [0, 1]; ORBIT_GPUS overrides",
        doc="the host indices of the GPUs Orbit may lease (whole numbers ≥ 0), e.g. `[0, 1]`; "
        "`[]` allows none; "
        "`ORBIT_GPUS` overrides it. A GPU outside the list is shown as `not allowed` and never "
        "leased; a request pinning it is refused at submit",
        topic="gpus.md",
    )
    gpu_outside_min_gb: float = declare(
        AT_LEAST_0,
        1.0,
        help="a GPU is busy outside Orbit above this much foreign memory",
        doc="a GPU not leased by Orbit counts as busy outside Orbit when more than this many "
        "GiB of its memory are used by processes outside Orbit's containers (plus memory no "
        "listed process accounts for)",
        topic="gpus.md#when-a-gpu-is-free",
    )
    # --- nodes and where runs execute
    node_unknown_after_s: float = declare(
        POSITIVE,
        30,
        help="a run on a node unreachable this long becomes `unknown`",
        doc="a run on another node whose node cannot be reached for this many seconds becomes "
        "`unknown` until the node answers again",
        topic="nodes.md#when-a-node-goes-away",
    )
    executor: str = declare(
        Choice("local", "slurm"),
        "local",
        nullable=True,
        help='"local": this machine\'s Docker; "slurm": each run is a Slurm job',
        doc="where runs run: `local`, this machine's Docker, admitted by the tick; `slurm`, each "
        "run a Slurm batch job that starts its container on the compute node. A Slurm home "
        "assumes the home, the data directory and Orbit's Python are shared with the nodes",
        topic="nodes.md#slurm",
    )
    slurm_partition: str | None = declare(
        TEXT,
        None,
        nullable=True,
        null_means="the cluster's default",
        help="sbatch -p; null: the cluster's default partition",
        doc="with `executor: slurm`: the partition of every job (`sbatch --partition`)",
        topic="nodes.md#slurm",
    )
    slurm_account: str | None = declare(
        TEXT,
        None,
        nullable=True,
        null_means="your default account",
        help="sbatch -A; null: the user's default account",
        doc="with `executor: slurm`: the account of every job (`sbatch --account`)",
        topic="nodes.md#slurm",
    )
    slurm_extra_args: tuple[str, ...] | None = declare(
        ListOf(TEXT, "sbatch options"),
        None,
        nullable=True,
        help='more sbatch options, a list, e.g. ["--qos=short"]',
        doc="with `executor: slurm`: more `sbatch` options, a list, given last, e.g. "
        "`[--qos=short, --time=1-00:00:00]`",
        topic="nodes.md#slurm",
    )
    # --- notifications
    web_url: str | None = declare(
        TEXT,
        None,
        nullable=True,
        help="how people reach `orbit web`, e.g. http://gpu1:7777: messages link to it",
        doc="how people reach `orbit web` (e.g. `http://gpu1:7777`, or the address of a tunnel "
        "or proxy in front of it); notification messages link to the run's or group's page "
        "under it. Without it, messages carry no link",
        topic="notify.md",
    )

    _written: dict[str, Any]  # every setting as config.yaml says it, else its default

    def __init__(self, written: Mapping[str, Any] | None = None) -> None:
        """`written`: settings as config.yaml holds them, already checked (`check_setting`)."""
        values = {name: s.default for name, s in SCHEMA.items()}
        values.update(written or {})
        object.__setattr__(self, "_written", values)
        for name, setting in SCHEMA.items():
            object.__setattr__(self, name, setting.typed(values[name]))

    def as_written(self) -> dict[str, Any]:
        """Every setting, in the schema's order, as config.yaml says it (or its default): what
        `orbit config` and the settings page show."""
        return dict(self._written)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"settings cannot change: {name} is read from config.yaml")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Settings):
            return NotImplemented
        return self._written == other._written

    def __repr__(self) -> str:
        return f"Settings({self._written!r})"


SCHEMA: dict[str, Setting] = {k: v for k, v in vars(Settings).items() if isinstance(v, Setting)}


def check_setting(key: str, value: Any) -> str | None:
    """Why `value` is not valid for `key`, or None."""
    setting = SCHEMA.get(key)
    if setting is None:
        return f"unknown setting {key!r} (known: {', '.join(sorted(SCHEMA))})"
    return setting.problem(value)


def markdown_rows() -> Iterator[str]:
    """docs/configuration.md's table of the settings, line by line."""
    yield "| Key | Accepts | Default | Meaning |"
    yield "|---|---|---|---|"
    for s in SCHEMA.values():
        accepts = s.kind.accepts + (", or `null`" if s.nullable else "")
        default = f"`{s.default_text}`" + (f" (= {s.null_means})" if s.null_means else "")
        page = s.topic.partition("#")[0]
        more = f" ([{page}]({s.topic}))" if s.topic else ""
        yield f"| `{s.name}` | {accepts} | {default} | {s.doc}{more} |"


def markdown_table() -> str:
    return "\n".join(markdown_rows()) + "\n"
