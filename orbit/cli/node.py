"""orbit node add|ls|rm|check: the other machines this home places runs on (docs/nodes.md)."""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orbit.cli.common import add_json, print_json, table
from orbit.env import Env
from orbit.errors import ConflictError, ExitCode, NodeError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from orbit.store.nodes import Node, NodeState


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("node", help="add, list, check and remove the nodes runs may go to")
    nsub = p.add_subparsers(dest="node_command", metavar="SUBCOMMAND", required=True)

    a = nsub.add_parser("add", help="add a node reached over SSH (or a Slurm login host)")
    a.add_argument("name", help="a name for the node (letters, digits, . _ -)")
    a.add_argument("url", help="ssh://[user@]host[:port] or slurm://[user@]login-host[:port]")
    a.add_argument("--home", help="ORBIT_HOME on the node (default: the node's ~/.orbit)")
    a.add_argument("--orbit", default="orbit", metavar="CMD",
                   help="the command that runs Orbit on the node (default: orbit)")  # fmt: skip
    a.add_argument("--partition", help="Slurm partition (slurm:// nodes)")
    a.add_argument("--account", help="Slurm account (slurm:// nodes)")
    add_json(a)
    a.set_defaults(func=add)

    ls = nsub.add_parser("ls", help="the nodes: reachable, Orbit version, what is free, runs")
    ls.add_argument("--cached", action="store_true", help="show the last readings; reach no node")
    add_json(ls)
    ls.set_defaults(func=list_nodes)

    c = nsub.add_parser("check", help="reach one node and say what works there")
    c.add_argument("name")
    add_json(c)
    c.set_defaults(func=check)

    r = nsub.add_parser("rm", help="forget a node (its runs and store stay on it)")
    r.add_argument("name")
    r.add_argument("--force", action="store_true", help="even while runs of this home are on it")
    add_json(r)
    r.set_defaults(func=remove)


def _free(info: dict[str, Any]) -> dict[str, Any]:
    """Free and total CPUs, memory and GPUs from a node's reading."""
    from orbit.sched.nodeplace import pool_from_dict

    try:
        pool = pool_from_dict(info.get("pool") or {})
    except ValueError:
        return {}
    total, leased, outside = pool.totals, pool.leased, pool.outside
    return {
        "cpus": [round(total.cpus - leased.cpus - outside.cpus, 2), total.cpus],
        "mem_gb": [round(total.mem_gb - leased.mem_gb - outside.mem_gb, 2), total.mem_gb],
        "gpus": [sum(1 for g in pool.gpus if g.allowed and not g.holder), len(pool.gpus)],
    }


def _runs_here(env: Env) -> dict[str, list[str]]:
    """The active runs of this home on each node."""
    from orbit.store.model import Run
    from orbit.store.runs import RunStore

    store = RunStore(env.home)
    out: dict[str, list[str]] = {}
    for item in store.load_many(store.leased_ids()):
        if isinstance(item, Run) and item.status.get("node") and item.state.active:
            out.setdefault(str(item.status["node"]), []).append(item.id)
    return out


def _row(node: Node, state: NodeState | None, runs: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"name": node.name, "url": node.url, "home": node.home}
    if state is None:
        row.update(reachable=None, error="never reached")
    else:
        row.update(reachable=state.ok, checked_at=state.at.isoformat() if state.at else None)
        if not state.ok:
            row["error"] = state.error
            row["since"] = state.since.isoformat() if state.since else None
    info = state.info if state else {}
    row["version"] = info.get("version")
    row["executor"] = info.get("executor")
    row["free"] = _free(info)
    row["datasets"] = sorted((info.get("datasets") or {}).keys())
    row["runs"] = {"here": runs, "there": info.get("runs") or {}}
    return row


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
    if args.json:
        print_json(env, {"here": nodes.local_name(env.home), "nodes": rows})
        return ExitCode.OK
    if not rows:
        print("no nodes; add one with `orbit node add NAME ssh://[user@]host`", file=env.stdout)
        return ExitCode.OK
    body = []
    for r in rows:
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
        body.append([r["name"], r["url"], state, r["version"] or "-", _pair(free.get("cpus")),
                     _pair(free.get("mem_gb"), " GiB"), _pair(free.get("gpus")), runs])  # fmt: skip
    table(
        env.stdout,
        ["NAME", "URL", "STATE", "ORBIT", "CPUS FREE", "MEMORY FREE", "GPUS FREE", "RUNS HERE"],
        body,
    )
    return ExitCode.OK


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
    if args.name in nodes.load(home):
        raise ConflictError(f"a node named {args.name!r} exists; remove it first (`orbit node rm`)")
    if args.name == nodes.local_name(home):
        raise ConflictError(f"{args.name!r} is this machine's own node name (ORBIT_NODE)")
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
    nodes.add(home, node)
    row = _row(node, state, [])
    if args.json:
        print_json(env, row)
        return ExitCode.OK
    free = row["free"]
    print(
        f"added node {node.name} ({node.url}): Orbit {row['version']}, "
        f"{_pair(free.get('cpus'))} CPUs, {_pair(free.get('mem_gb'), ' GiB')} memory, "
        f"{_pair(free.get('gpus'))} GPUs free; reached in {took:.2f} s",
        file=env.stdout,
    )
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
    if args.json:
        print_json(env, {"removed": node.name, "url": node.url, "runs": there})
    else:
        print(f"removed node {node.name} ({node.url})", file=env.stdout)
    return ExitCode.OK
