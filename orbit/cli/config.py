"""orbit config: show settings; `config data DIR` sets the data directory; `config set K V`."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shutil
from pathlib import Path
from typing import Any

from orbit.cli.common import add_json, print_json
from orbit.env import Env
from orbit.errors import ConflictError, ExitCode, UsageError
from orbit.human import fmt_num
from orbit.store.home import Home
from orbit.store.model import Run
from orbit.store.settings import SCHEMA, Choice, Flag


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show or change settings (config.yaml)")
    add_json(p)
    p.set_defaults(func=show)
    csub = p.add_subparsers(dest="action", metavar="ACTION")
    d = csub.add_parser(
        "data", help="put runs and code snapshots under DIR (large artifacts off the home disk)"
    )
    d.add_argument("dir")
    d.add_argument("--move", action="store_true", help="move existing finished runs there")
    d.set_defaults(func=set_data)
    s = csub.add_parser(
        "set",
        help="set a setting",
        epilog=settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    key = s.add_argument("key", choices=sorted(SCHEMA))
    key.completer = complete_keys
    value = s.add_argument("value", help="a YAML value; `null` restores the default")
    value.completer = complete_values
    s.set_defaults(func=set_value)
    r = csub.add_parser(
        "reset",
        help="move config.yaml aside (config.yaml.damaged-<time> or .old-<time>): "
        "every setting back to its default, but the data directory",
    )
    r.set_defaults(func=reset)


def settings_help() -> str:
    """`orbit config set --help`'s list of the settings: what each takes, its default, and
    what it is for (docs/configuration.md tells more)."""
    lines = ["settings (docs/configuration.md):"]
    for setting in SCHEMA.values():
        accepts = setting.kind.phrase + (", or null" if setting.nullable else "")
        lines.append(f"  {setting.name}: {accepts}; default {setting.default_text}")
        lines.append(f"      {setting.help}")
    return "\n".join(lines)


def complete_keys(prefix: str, **_: Any) -> dict[str, str]:
    """The settings' names, each with its one line (shells that show descriptions do)."""
    return {name: SCHEMA[name].help for name in sorted(SCHEMA) if name.startswith(prefix)}


def complete_values(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """What the setting takes when it is a choice or a flag, and `null` (its default)."""
    setting = SCHEMA.get(getattr(parsed_args, "key", "") or "")
    if setting is None:
        return []
    values = ["true", "false"] if isinstance(setting.kind, Flag) else []
    if isinstance(setting.kind, Choice):
        values = list(setting.kind.choices)
    return [v for v in [*values, "null"] if v.startswith(prefix)]


def show(args: argparse.Namespace, env: Env) -> int:
    settings: dict[str, Any] = {
        "home": str(env.home.root),
        "data_dir": str(env.home.data_dir),
        **{k: v for k, v in env.home.settings.as_written().items() if k != "data_dir"},
    }
    if getattr(args, "json", False):
        print_json(env, settings)
    else:
        for key, value in settings.items():
            print(f"{key}: {yaml_text(value)}", file=env.stdout)
    return ExitCode.OK


def yaml_text(value: Any) -> str:
    """`value` as YAML writes it (`null`, `false`, `[0, 1]`, a string quoted when YAML would
    read it as something else): what `orbit config set` and config.yaml take back."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...")


def set_value(args: argparse.Namespace, env: Env) -> int:
    import yaml

    try:
        value = yaml.safe_load(args.value)
    except yaml.YAMLError:
        raise UsageError(f"not a YAML value: {args.value!r}") from None
    if args.key == "data_dir":
        raise UsageError("use `orbit config data DIR` to move the data directory")
    check_capacity(args.key, value)
    moved = env.home.set_config(args.key, value)
    if moved is not None:
        print(
            f"orbit: warning: {env.home.config_path} could not be read; moved it to {moved} "
            f"(copy settings back from it): {args.key} is set, the others are the defaults",
            file=env.stderr,
        )
    value = env.home.settings.as_written()[args.key]
    if getattr(args, "json", False):  # `orbit config --json set K V`
        print_json(env, {"key": args.key, "value": value})
    else:
        print(f"{args.key}: {yaml_text(value)}", file=env.stdout)
    return ExitCode.OK


def reset(args: argparse.Namespace, env: Env) -> int:
    moved = env.home.move_config_aside()
    data_dir = env.home.settings.data_dir
    if getattr(args, "json", False):
        print_json(env, {"moved_to": None if moved is None else str(moved), "data_dir": data_dir})
    elif moved is None:
        print(f"no {env.home.config_path}: the settings are the defaults", file=env.stdout)
    else:
        kept = f"; data_dir kept: {data_dir}" if data_dir else ""
        print(
            f"moved {env.home.config_path} to {moved}: the settings are the defaults{kept}",
            file=env.stdout,
        )
    return ExitCode.OK


def check_capacity(key: str, value: Any) -> None:
    """Refuse a total larger than this machine: a run's default takes the total, and Docker
    refuses a container more CPUs than the machine has (every default run would fail)."""
    from orbit.sched import machine
    from orbit.sched.resources import GIB

    if key == "total_cpus" and isinstance(value, int | float) and value > machine.cpu_count():
        raise UsageError(
            f"total_cpus {fmt_num(value)} is more than this machine's {machine.cpu_count()} CPUs; "
            "`orbit config set total_cpus null` uses them all"
        )
    mem = machine.memory()[0] / GIB
    if key == "total_mem_gb" and isinstance(value, int | float) and value > mem:
        raise UsageError(
            f"total_mem_gb {fmt_num(value)} is more than this machine's {fmt_num(mem)} GiB; "
            "`orbit config set total_mem_gb null` uses all of it"
        )


def set_data(args: argparse.Namespace, env: Env) -> int:
    from orbit.store.runs import RunStore, id_key

    home = env.home
    if env.environ.get("ORBIT_DATA"):
        raise UsageError("ORBIT_DATA is set and overrides config.yaml; unset it first")
    new = (env.cwd / args.dir).expanduser().resolve()
    old_runs = home.runs_dir
    store = RunStore(home)
    existing = (
        [n for n in os.listdir(old_runs) if not n.startswith(".")] if old_runs.is_dir() else []
    )
    if new / "runs" == old_runs:
        if getattr(args, "json", False):
            print_json(env, {"data_dir": str(new), "moved": []})
        else:
            print(f"data directory is already {new}", file=env.stdout)
        return ExitCode.OK
    if existing:
        if not args.move:
            raise UsageError(
                f"{old_runs} holds {len(existing)} runs; add --move to move them to {new}/runs"
            )
        if any(isinstance(r, Run) and r.state.active for r in store.load_many(store.active_ids())):
            raise ConflictError("runs are active; wait for them or cancel them before moving")
    new.mkdir(parents=True, exist_ok=True)
    (new / "runs").mkdir(exist_ok=True)
    for name in existing:
        shutil.move(str(old_runs / name), str(new / "runs" / name))
    snapshots = move_snapshots(home, new / "snapshots")
    home.set_config("data_dir", str(new))
    if getattr(args, "json", False):
        print_json(env, {"data_dir": str(new), "moved": sorted(existing, key=id_key)})
    else:
        print(
            f"data directory: {new} ({len(existing)} runs and {snapshots} snapshots moved)",
            file=env.stdout,
        )
    return ExitCode.OK


def move_snapshots(home: Home, target: Path) -> int:
    """Move the code snapshots to `target`, from the current data directory and from
    ORBIT_HOME/snapshots (where Orbit kept them before they moved beside runs/); the count of
    snapshots (manifests and tars; the packs they use move along, uncounted).

    A snapshot or pack is named by its content, so one already at `target` is the same file
    and the other copy is dropped. Each arrives whole (copied under a temporary name, then
    renamed): an interrupted move never leaves a truncated file that a later submit would take
    as whole. Manifests move before the packs, so the old place never holds a manifest whose
    packs have left; the new one is not used until the move has finished.
    """
    count = 0
    for folder in dict.fromkeys((home.snapshots_dir, home.root / "snapshots")):
        if folder == target or not folder.is_dir():
            continue
        for snap in sorted([*folder.glob("*.manifest"), *folder.glob("*.tar")]):
            target.mkdir(exist_ok=True)
            _move_whole(snap, target / snap.name)
            count += 1
        packs = folder / "packs"
        for pack in sorted(packs.glob("*.pack")):  # not the temporary files of a crashed write
            (target / "packs").mkdir(parents=True, exist_ok=True)
            _move_whole(pack, target / "packs" / pack.name)
        with contextlib.suppress(OSError):  # left when they hold something else
            packs.rmdir()
        with contextlib.suppress(OSError):
            folder.rmdir()
    return count


def _move_whole(src: Path, dest: Path) -> None:
    if dest.exists():  # the same content
        src.unlink()
        return
    try:
        os.replace(src, dest)  # one file system: a rename
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    temp = dest.with_name(f".{dest.name}.moving")
    shutil.copyfile(src, temp)
    os.replace(temp, dest)
    src.unlink()
