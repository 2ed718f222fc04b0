"""The run options `orbit run` and `orbit sweep` share, and sweep's `-p KEY=V1,V2`: what a
launch (cli/launch.py) records and parses again for `orbit sweep --like`."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from orbit.cli.common import (
    complete_datasets,
    index_list,
    key_value,
    non_negative_int,
    positive_float,
)
from orbit.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

# Below these, Docker refuses the container (or the run could not do anything): refused at
# submit, with the option named, instead of a run that fails when it starts.
MIN_CPUS = 0.01  # Docker's smallest CPU limit
MIN_MEM_MIB = 6  # Docker's smallest memory limit
MIN_TIMEOUT_S = 1.0


def _at_least(minimum: float, unit: float, what: str) -> Callable[[str], float]:
    """An argparse type: a positive number that, times `unit`, is at least `minimum`."""

    def check(text: str) -> float:
        value = positive_float(text)
        if value * unit < minimum:
            raise argparse.ArgumentTypeError(f"at least {what}, got {text!r}")
        return value

    return check


cpus_value = _at_least(MIN_CPUS, 1, f"{MIN_CPUS:g} CPUs (Docker's smallest limit)")
mem_value = _at_least(  # --mem is in GiB
    MIN_MEM_MIB, 1024, f"0.006 GiB ({MIN_MEM_MIB} MiB, Docker's smallest limit)"
)
timeout_value = _at_least(MIN_TIMEOUT_S, 60, "1 second (0.017 min)")  # --timeout is in minutes


def add_run_options(p: argparse.ArgumentParser) -> None:
    img = p.add_mutually_exclusive_group()
    img.add_argument("--image", help="image to run (pulled when not local)")
    img.add_argument("--dockerfile", help="Dockerfile to build (its directory is the context)")
    p.add_argument("--cpus", type=cpus_value, help="CPU limit (default 4, capped at the machine's)")
    p.add_argument("--mem", type=mem_value, metavar="GB", help="memory limit in GiB (default 16)")
    p.add_argument("--gpus", type=non_negative_int, default=0, help="number of GPUs (default 0)")
    p.add_argument(
        "--node",
        metavar="NAME",
        help="run only on this node (`orbit node ls`); default: here, else any node that fits",
    )
    p.add_argument(
        "--gpu-mem",
        type=positive_float,
        metavar="GB",
        help="minimum free memory on each leased GPU, in GiB",
    )
    p.add_argument(
        "--gpu-ids",
        type=index_list,
        metavar="0,2",
        help="pin these GPUs (host indices, as nvidia-smi shows them)",
    )
    p.add_argument("-n", "--name", help="a name for the run")
    p.add_argument("-g", "--group", help="group (for sweeps and `wait -g`)")
    p.add_argument(
        "--objective",
        metavar="METRIC[:max|min]",
        help="declare the group's objective: the metric its runs are judged by and which way "
        "is better (default direction: the name's, e.g. loss:min, acc:max)",
    )
    p.add_argument("--folder", help="folder path to file the run under, e.g. papers/ablation")
    p.add_argument("-t", "--tag", action="append", type=key_value, default=[], metavar="KEY=VALUE")
    p.add_argument(
        "-m",
        "--mount",
        action="append",
        default=[],
        metavar="SRC:DST[:rw]",
        help="bind-mount a host path (read-only unless :rw)",
    )
    data = p.add_argument(
        "-d",
        "--data",
        action="append",
        default=[],
        metavar="NAME[:DST[:rw]]",
        help="mount a named dataset (orbit data ls) at DST (default /data/NAME), read-only "
        "unless :rw",
    )
    data.completer = complete_datasets  # type: ignore[attr-defined]
    p.add_argument(
        "-e",
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment variable (stored with the run: no secrets)",
    )
    p.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="VAR",
        help="pass VAR from this environment (for secrets; never stored with the run)",
    )
    proj = p.add_mutually_exclusive_group()
    proj.add_argument("--project", metavar="DIR", help="Git repository to snapshot (default: cwd)")
    proj.add_argument("--no-project", action="store_true", help="run without code")
    p.add_argument(
        "--no-snapshot",
        action="store_true",
        help="mount the repository read-only at /workspace instead of copying it",
    )
    net = p.add_mutually_exclusive_group()
    net.add_argument("--no-network", action="store_true", help="no network in the container")
    net.add_argument("--host-network", action="store_true", help="share the host's network")
    p.add_argument(
        "--timeout", type=timeout_value, metavar="MIN", help="stop the run after MIN minutes"
    )
    p.add_argument("--root", action="store_true", help="run as root instead of your uid:gid")
    p.add_argument(
        "--auth",
        metavar="PROFILE",
        help="run a Codex / Claude Code CLI inside, with this auth profile (orbit auth list)",
    )


KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def parse_params(items: list[str]) -> dict[str, list[str]]:
    if not items:
        raise UsageError("give at least one parameter: -p KEY=V1,V2")
    params: dict[str, list[str]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not KEY.match(key):
            raise UsageError(
                f"-p expects KEY=V1,V2 with KEY a name like lr or batch_size, got {item!r}"
            )
        if key in params:
            raise UsageError(f"-p {key} is given twice; list all its values in one -p {key}=…")
        values = text.split(",")
        if any(v == "" for v in values):
            raise UsageError(f"-p {key}: empty value in {text!r}")
        dup = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if dup is not None:
            raise UsageError(f"-p {key}: value {dup!r} is given twice")
        params[key] = values
    return params
