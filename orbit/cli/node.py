"""orbit node add|ls|test|rm: the other machines this home places runs on (docs/nodes.md)."""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orbit.cli.common import print_json
from orbit.cli.profiles import Commands, show, show_list, show_removed
from orbit.env import Env
from orbit.errors import ConflictError, ExitCode, NodeError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from orbit.store.nodes import Node, NodeState


def add_parser(sub: argparse._SubParsersAction) -> None:
    cmds = Commands(
        sub,
        "node",
        "orbit.store.nodes",
        help="add, list, test and remove the nodes runs may go to",
    )
    a = cmds.add(
        "add a node reached over SSH (or a Slurm login host)",
        add,
        "a name for the node (letters, digits, . _ -)",
    )
    a.add_argument("url", help="ssh://[user@]host[:port] or slurm://[user@]login-host[:port]")
    a.add_argument("--home", help="ORBIT_HOME on the node (default: the node's ~/.orbit)")
    a.add_argument("--orbit", default="orbit", metavar="CMD",
                   help="the command that runs Orbit on the node (default: orbit)")  # fmt: skip
    a.add_argument("--partition", help="Slurm partition (slurm:// nodes)")
    a.add_argument("--account", help="Slurm account (slurm:// nodes)")
    ls = cmds.ls("the nodes: reachable, Orbit version, what is free, runs", list_nodes)
    ls.add_argument("--cached", action="store_true", help="show the last readings; reach no node")
    cmds.named("test", "reach one node and say what works there", check, aliases=["check"])
    r = cmds.named("rm", "forget a node (its runs and store stay on it)", remove)
    r.add_argument("--force", action="store_true", help="even while runs of this home are on it")


def _runs_here(env: Env) -> dict[str, list[str]]:
    """The active runs of this home on each node."""
    from orbit.sched.noderows import runs_on_nodes
    from orbit.store.model import Run
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    return runs_on_nodes(r for r in store.load_many(store.leased_ids()) if isinstance(r, Run))


def _row(node: Node, state: NodeState | None, runs: list[str]) -> dict[str, Any]:
    from orbit.sched.noderows import node_row

    return node_row(node, state, runs)


def _pair(value: list[Any] | None, unit: str = "") -> str:
    if not value:
        return "-"
    free, total = value
    return f"{round(free, 1):g}/{round(total, 1):g}{unit}"


def list_nodes(args: argparse.Namespace, env: Env) -> int:
    from orbit.nodes.probe import read_node
    from orbit.store import nodes

    registry = nodes.load(env.home)
    if args.cached:
        states = {name: nodes.read_state(env.home, name) for name in registry}
    else:
        with ThreadPoolExecutor(max_workers=min(8, len(registry) or 1)) as pool:
            found = pool.map(lambda n: read_node(env.home, n, timeout=15), registry.values())
            states = dict(zip(registry, found, strict=True))
    placed = _runs_here(env)
    rows = [_row(node, states[name], placed.get(name, [])) for name, node in registry.items()]
    body = {"here": nodes.local_name(env.home), "nodes": rows}
    headers = [*NODE_HEADERS, "RUNS HERE"]
    show_list(env, args, nodes.STORE, body, headers, [node_cells(r) for r in rows])
    return ExitCode.OK


NODE_HEADERS = ["NAME", "URL", "STATE", "ORBIT", "CPUS FREE", "MEMORY FREE", "GPUS FREE"]


def node_cells(r: dict[str, Any]) -> list[str]:
    """A row of `orbit node ls` (and of `orbit resources`' nodes)."""
    if r["reachable"]:
        state = "ok"
    elif r["reachable"] is None:
        state = "never reached"
    else:
        state = f"unreachable: {r.get('error')}"
    free = r["free"]
    there = r["runs"]["there"]
    runs = (
        f"{len(r['runs']['here'])} (node: {there.get('active', '-')} active, "
        f"{there.get('queued', '-')} queued)"
    )
    return [r["name"], r["url"], state, r["version"] or "-", _pair(free.get("cpus")),
            _pair(free.get("mem_gb"), " GiB"), _pair(free.get("gpus")), runs]  # fmt: skip


def add(args: argparse.Namespace, env: Env) -> int:
    from orbit.nodes.probe import read_node
    from orbit.store import nodes

    home = env.home
    node = nodes.parse_url(
        args.name, args.url, home=args.home, partition=args.partition, account=args.account
    )
    node.orbit = args.orbit
    if args.home is not None and not args.home.startswith("/"):
        raise UsageError(f"--home must be an absolute path on the node, got {args.home!r}")
    if node.kind != "slurm" and (args.partition or args.account):
        raise NodeError("--partition and --account are for slurm:// nodes")
    nodes.check_new(home, node.name, replace=args.replace)
    started = time.monotonic()
    state = read_node(home, node)
    took = time.monotonic() - started
    if not state.ok:
        nodes.state_path(home, node.name).unlink(missing_ok=True)
        raise NodeError(f"{state.error}; node not added")
    if node.kind == "slurm":
        # The node's home hands its runs to Slurm from now on (docs/nodes.md#slurm).
        from orbit.nodes import ssh

        ssh.call(node, env.environ, "configure-slurm", [args.partition or "", args.account or ""])
        state = read_node(home, node)
        if not state.ok:
            raise NodeError(f"{state.error}; node not added")
    nodes.add(home, node, replace=args.replace)
    row = _row(node, state, [])
    free = row["free"]
    line = (
        f"added node {node.name} ({node.url}): Orbit {row['version']}, "
        f"{_pair(free.get('cpus'))} CPUs, {_pair(free.get('mem_gb'), ' GiB')} memory, "
        f"{_pair(free.get('gpus'))} GPUs free; reached in {took:.2f} s"
    )
    show(env, args, row, line)
    return ExitCode.OK


def check(args: argparse.Namespace, env: Env) -> int:
    from orbit.nodes.probe import read_node
    from orbit.store import nodes

    node = nodes.get(env.home, args.name)
    started = time.monotonic()
    state = read_node(env.home, node)
    took = time.monotonic() - started
    row = _row(node, state, _runs_here(env).get(node.name, []))
    row["took_s"] = round(took, 3)
    info = state.info if state.ok else {}
    row["problems"] = info.get("problems") or []
    if args.json:
        print_json(env, row)
        return ExitCode.OK if state.ok else ExitCode.NODE
    if not state.ok:
        print(f"node {node.name} ({node.url}): {state.error}", file=env.stdout)
        return ExitCode.NODE
    free = row["free"]
    lines = [
        f"node {node.name} ({node.url}), home {info.get('home')}",
        f"  reached over ssh in {took:.2f} s; Orbit {info.get('version')} "
        f"(protocol {info.get('protocol')})",
        f"  executor: {info.get('executor')}; GPUs read through {info.get('gpu_kind')}",
        f"  free: {_pair(free.get('cpus'))} CPUs, {_pair(free.get('mem_gb'), ' GiB')} memory, "
        f"{_pair(free.get('gpus'))} GPUs",
        f"  datasets: {', '.join(row['datasets']) or 'none'}",
        f"  runs of this home there: {len(row['runs']['here'])}",
    ]
    lines += [f"  problem: {p}" for p in row["problems"]]
    print("\n".join(lines), file=env.stdout)
    return ExitCode.OK


def _give_up(env: Env, name: str, ids: list[str]) -> None:
    """The runs of this home on a node it forgets: failed here (they go on there)."""
    from orbit.errors import OrbitError
    from orbit.store.model import RunState, now_iso
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    for run_id in ids:
        there = (store.load(run_id).status.get("remote") or {}).get("id")
        where = f" as run {there}" if there else ""
        try:
            store.transition(
                run_id,
                RunState.FAILED,
                actor=env.actor,
                event="node-removed",
                reason=f"node {name} was removed from this home (the run goes on there{where})",
                finished_at=now_iso(),
            )
        except OrbitError:
            continue  # it ended meanwhile


def remove(args: argparse.Namespace, env: Env) -> int:
    from orbit.store import nodes

    nodes.get(env.home, args.name)
    there = _runs_here(env).get(args.name, [])
    if there and not args.force:
        raise ConflictError(
            f"runs {', '.join(there)} of this home are on node {args.name}; "
            "wait for them, or use --force (they become failed here and go on there)"
        )
    node = nodes.remove(env.home, args.name)
    _give_up(env, node.name, there)
    body = {"removed": node.name, "url": node.url, "runs": there}
    show_removed(env, args, nodes.STORE, body, node.name, f" ({node.url})")
    return ExitCode.OK
