"""The driver of a job: a restartable state machine over its trial files (`orbit bench _drive`).

Each pass reads job.json and every trial, moves each trial one step on, and sleeps a moment:

    pending     → solving     (when fewer than --max-running trials are in flight)
    solving     submit the solve run, wait for it; its execution decides: graded → collecting,
                else → done (invalid)
    collecting  copy the declared artifacts out of the solved image (collect.py) → verifying
    verifying   submit verify run number `verifies`, wait for it, score it → done

Every step is written to the trial file before the next acts on it. A run is submitted only
after the trial says it is wanted, and a wanted run not yet named by the trial is first looked
for among the runs (tags `bench`, `trial`, `phase`): a driver killed at any instant and started
again submits no run twice. A cancelled job: the driver cancels the trials' active runs, marks
the unfinished trials, and stops; when they were all regrades, each keeps its earlier grading
and the job is finished again.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import IO, Any

from orbit import harnesses
from orbit.bench import collect as collecting
from orbit.bench import jobs, trajectory
from orbit.bench.adapters import load_adapter
from orbit.bench.benchmarks import resource_entry
from orbit.bench.methods import BUNDLE_TARGET, agent_command, check_method
from orbit.bench.model import (
    Method,
    Phase,
    Task,
    Trial,
    job_dir,
    load_benchmark,
    load_job,
    load_trials,
    save_trial,
)
from orbit.bench.repair import readable_trials, runs_of
from orbit.bench.runs import execution_of, phase_request, solved_tag, verify_problem
from orbit.errors import OrbitError
from orbit.execute.submit import InContainer, prepare, submit
from orbit.store.files import atomic_write
from orbit.store.home import Home
from orbit.store.model import RunState, now_iso
from orbit.store.runs import Broken, RunStore

log = logging.getLogger(__name__)

POLL_S = 0.5
TICK_EVERY_S = 5.0
CANCEL_WAIT_S = 30.0
IN_FLIGHT = ("solving", "collecting", "verifying")


def trial_dir(home: Home, job_id: str, trial: str) -> Path:
    return job_dir(home, job_id) / "trials" / trial


class Driver:
    def __init__(self, home: Home, job_id: str, actor: str = "bench-driver") -> None:
        self.home = home
        self.job = load_job(home, job_id)
        self.bench = load_benchmark(home, self.job.benchmark)
        self.adapter = load_adapter(home, self.bench)
        self.tasks: dict[str, Task] = {}
        self.methods = {m.name: m for m in self.job.methods}
        self.store = RunStore(home)
        self.actor = actor
        self.submitted = False
        self.last_tick = 0.0
        self.fresh: set[tuple[str, str]] = set()  # runs this driver wished for (find_run)
        self.rows: list[dict[str, Any] | Broken] | None = None  # the runs, read once per pass
        self.said: set[str] = set()  # the problems driver.log has named

    # --- the loop ---------------------------------------------------------------------------
    def run(self) -> str:
        """Drive the job until it is finished or cancelled; why it stopped."""
        while True:
            self.job = load_job(self.home, self.job.id)
            if self.job.state == "cancelled":
                self.cancel()
                return "cancelled"
            if self.job.state != "running":  # finished by a driver before this one
                return self.job.state
            self.rows = None
            trials, problems = self.trials()
            if self.step_all(trials) and not problems:
                self.finish()
                return "finished"
            self.tick_when_due()
            time.sleep(POLL_S)

    def trials(self) -> tuple[list[Trial], list[str]]:
        """The trials (a damaged one rebuilt from its runs) and why the job cannot finish yet
        (each said once in driver.log)."""
        trials, problems = readable_trials(self.home, self.job, self.list_rows)
        for problem in problems:
            if problem not in self.said:
                self.said.add(problem)
                log.warning("%s", problem)
        return trials, problems

    def list_rows(self) -> list[dict[str, Any] | Broken]:
        """The runs, listed once per pass."""
        if self.rows is None:
            self.rows = self.store.list_rows()
        return self.rows

    def step_all(self, trials: list[Trial]) -> bool:
        """Move every trial one step; True when all are done."""
        in_flight = sum(t.phase in IN_FLIGHT for t in trials)
        cap = self.job.max_running
        for trial in trials:
            if trial.phase == "pending":
                if cap is not None and in_flight >= cap:
                    continue
                in_flight += 1
            try:
                self.step(trial)
            except OrbitError as exc:  # this trial's problem, not the job's
                unsolved = trial.solve_run is None and trial.execution is None
                fields = {"execution": f"not started ({exc})"} if unsolved else {}
                self.done(trial, "invalid", str(exc), **fields)
            except Exception as exc:  # a bug: the trial ends, the job goes on
                log.exception("trial %s", trial.id)
                self.done(trial, "invalid", f"internal error ({type(exc).__name__}: {exc})")
        return all(t.phase == "done" for t in trials)

    def step(self, trial: Trial) -> None:
        if trial.phase == "pending":
            self.save(trial, phase="solving")
            self.fresh.add((trial.id, "solve"))
        if trial.phase == "solving":
            self.solving(trial)
        if trial.phase == "collecting":
            self.collect(trial)
        if trial.phase == "verifying":
            self.verifying(trial)

    def tick_when_due(self, force: bool = False) -> None:
        if not (force or self.submitted) and time.monotonic() - self.last_tick < TICK_EVERY_S:
            return
        from orbit.execute.spawn import spawn
        from orbit.sched.tick import tick

        self.submitted = False
        self.last_tick = time.monotonic()
        try:
            tick(self.home, spawn=spawn, actor=self.actor)
        except (OrbitError, OSError) as exc:
            log.warning("tick failed: %s", exc)

    def finish(self) -> None:
        jobs.set_state(self.home, self.job.id, "finished", unless=("cancelled",))
        jobs.drop_secrets(self.home, self.job.id)

    # --- trial steps ------------------------------------------------------------------------
    def save(self, trial: Trial, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(trial, key, value)
        trial.updated_at = now_iso()
        save_trial(self.home, self.job.id, trial)

    def done(self, trial: Trial, evaluation: str, reason: str | None, **fields: Any) -> None:
        image = fields.get("solved_image", trial.solved_image)
        cleanup = f"keeps image {image} (bench rm-job removes it)" if image else "done"
        self.save(
            trial, phase="done", evaluation=evaluation, reason=reason, cleanup=cleanup, **fields
        )
        found = self.trajectories(trial)  # after the save: the trajectory carries the grading
        if found or trial.trajectories:
            self.save(trial, trajectories=found)

    def trajectories(self, trial: Trial) -> list[str]:
        """An agent method's finished solve: its session as the trial's ATIF trajectory, with
        the grading just given (bench/trajectory.py). A session that cannot be converted is
        logged and the trial goes on without it."""
        method = self.methods.get(trial.method)
        if method is None or method.agent not in harnesses.ids() or not trial.solve_run:
            return []
        try:
            solve = self.store.load(trial.solve_run)
            if solve.state.active:  # a cancelled job's solve that did not stop in time
                return []
            return trajectory.record(self.home, self.job.id, trial, solve)
        except (OrbitError, OSError) as exc:
            log.warning("trial %s: no trajectory: %s", trial.id, exc)
            return []

    def solving(self, trial: Trial) -> None:
        if trial.solve_run is None:
            run_id = self.find_run(trial, "solve") or self.submit_solve(trial)
            if run_id is None:
                return  # recorded as not started
            self.save(trial, solve_run=run_id)
        run = self.store.load(str(trial.solve_run))
        if run.state.active:
            return
        execution, graded, reason, image = execution_of(run)
        if graded and image is None and run.spec.get("commit"):
            graded, reason = False, reason or "the solved state was not kept"
        if not graded:
            if image:
                jobs.remove_images([image])
            self.done(trial, "invalid", reason, execution=execution, solved_image=None)
            return
        self.save(trial, execution=execution, solved_image=image, phase="collecting")

    def collect(self, trial: Trial) -> None:
        folder = trial_dir(self.home, self.job.id, trial.id)
        paths = _read_phase(folder / "solve.json").get("collect") or []
        solve = self.store.load(str(trial.solve_run))
        collecting.collect(folder, trial.solved_image, list(paths), solve.dir)
        self.save(trial, phase="verifying", verifies=len(trial.verify_runs) + 1)
        self.fresh.add((trial.id, f"verify-{trial.verifies}"))

    def verifying(self, trial: Trial) -> None:
        if len(trial.verify_runs) < trial.verifies:
            label = f"verify-{trial.verifies}"
            run_id = self.find_run(trial, label) or self.submit_verify(trial, label)
            if run_id is None:
                return
            self.save(trial, verify_runs=[*trial.verify_runs, run_id])
        run = self.store.load(trial.verify_runs[-1])
        if run.state.active:
            return
        if trial.earlier is not None and run.state is RunState.CANCELLED:
            trial.keep_earlier()  # a cancelled regrade grades nothing
            self.done(trial, str(trial.evaluation), trial.reason)
            return
        problem = verify_problem(run)
        if problem:
            self.done(trial, "invalid", problem, score=None, scores={}, earlier=None)
            return
        score = self.adapter.score(self.task(trial), run.dir)
        evaluation = "valid" if score.valid else "invalid"
        value = score.score if score.valid else None
        self.done(
            trial, evaluation, score.reason, score=value, scores=dict(score.scores), earlier=None
        )

    # --- submitting -------------------------------------------------------------------------
    def task(self, trial: Trial) -> Task:
        task = self.tasks.get(trial.task)
        if task is None:
            raise OrbitError(f"the benchmark no longer has task {trial.task!r}")
        return task

    def find_run(self, trial: Trial, phase: str) -> str | None:
        """The run of this trial and phase submitted before the trial could name it: only a
        run wanted before this driver started can be one (a wish of this driver's own is
        followed by its submit, or by this process's end)."""
        if (trial.id, phase) in self.fresh:
            return None
        return runs_of(self.list_rows(), self.job.id, trial.id).get(phase)

    def submit_solve(self, trial: Trial) -> str | None:
        task, method = self.task(trial), self.methods[trial.method]
        folder = trial_dir(self.home, self.job.id, trial.id)
        folder.mkdir(parents=True, exist_ok=True)
        phase = self.adapter.solve(task, method, folder)
        phase = replace(phase, **resource_entry(self.bench, task.name)[1])
        _write_phase(folder / "solve.json", phase)
        in_container = None
        if method.agent in harnesses.ids():
            phase, in_container = self.agent(phase, method)
        tag = solved_tag(self.home, self.job.id, trial.id) if phase.commit else None
        return self.submit(trial, "solve", phase, in_container=in_container, commit=tag)

    def submit_verify(self, trial: Trial, label: str) -> str | None:
        task = self.task(trial)
        folder = trial_dir(self.home, self.job.id, trial.id)
        phase = self.adapter.verify(task, folder, trial.solved_image)
        pass_env = list(dict.fromkeys([*phase.pass_env, *self.bench.pass_env]))
        phase = replace(phase, pass_env=pass_env, commit=False)
        _write_phase(folder / f"{label}.json", phase)
        return self.submit(trial, label, phase)

    def submit(
        self,
        trial: Trial,
        label: str,
        phase: Phase,
        *,
        in_container: InContainer | None = None,
        commit: str | None = None,
    ) -> str | None:
        """Submit one run of the trial; its id, or None when it could not be (the trial is then
        done, invalid, with the reason; a failed build leaves its failed run named)."""
        job = self.job.id
        req = phase_request(
            phase,
            f"{trial.id}.{label}",
            group=f"bench-{job}",
            tags={"bench": job, "trial": trial.id, "phase": label},
            in_container=in_container,
            commit=commit,
            record={"bench": {"job": job, "trial": trial.id, "phase": label.split("-")[0]}},
        )
        environ = self.home.environ
        try:
            prepared = prepare(self.home, req, cwd=self.home.root, environ=environ, progress=_quiet)
            run = submit(self.home, prepared, actor=self.actor)
        except OrbitError as exc:
            self.fresh.discard((trial.id, label))
            self.rows = None
            failed = self.find_run(trial, label)
            what = "solve" if label == "solve" else "verify run"
            fields: dict[str, Any] = {}
            if failed and label == "solve":
                fields["solve_run"] = failed
            elif failed:
                fields["verify_runs"] = [*trial.verify_runs, failed]
            if label == "solve":
                fields["execution"] = f"not started ({exc})"
            self.done(trial, "invalid", f"the {what} could not start: {exc}", **fields)
            return None
        self.submitted = True
        return run.id

    def agent(self, phase: Phase, method: Method) -> tuple[Phase, InContainer]:
        """The agent's command and its CLI inside, from the phase's instruction."""
        from orbit.agents import auth
        from orbit.agents.incontainer import setup
        from orbit.bench.runs import image_defaults

        check_method(self.home, method)
        if not phase.command and not phase.instruction:
            raise OrbitError("the adapter gave no instruction for the agent")
        workdir, user = image_defaults(self.home, phase)
        user = phase.user if phase.user is not None else user
        root = user in ("", "root", "0") or user.split(":")[0] in ("root", "0")
        profile = auth.get(self.home, str(method.auth))
        wd = phase.workdir or workdir or "/"
        in_container = setup(self.home, profile, self.home.environ, container_root=root, workdir=wd)
        mounts = list(phase.mounts)
        if method.bundle:
            mounts.append({"source": method.bundle, "target": BUNDLE_TARGET})
        # An adapter that runs the agent through the benchmark's own runner (asi) gives the
        # command; Orbit then adds only the agent's CLI inside.
        command = list(phase.command) or agent_command(method, str(phase.instruction))
        return replace(phase, command=command, mounts=mounts), in_container

    # --- cancelling -------------------------------------------------------------------------
    def cancel(self) -> None:
        """Cancel the active runs of the unfinished trials, wait for them, mark the trials."""
        from orbit.execute.control import request_cancel

        trials = self.trials()[0]
        regrades = jobs.regrades_only(trials)
        open_trials = [t for t in trials if t.phase != "done"]
        ids = [r for t in open_trials for r in [t.solve_run, *t.verify_runs[-1:]] if r]
        active = [r for r in ids if self.store.exists(r) and self.store.load(r).state.active]
        for run_id in active:
            request_cancel(self.store, run_id, actor=self.actor)
        self.tick_when_due(force=True)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline and any(self.store.load(r).state.active for r in active):
            time.sleep(POLL_S)
        for trial in open_trials:
            if trial.earlier is not None:  # a regrade: the grading before it stands
                trial.keep_earlier()
                self.done(trial, str(trial.evaluation), trial.reason)
                continue
            execution = trial.execution or "cancelled"
            self.done(trial, "invalid", "job cancelled", execution=execution, score=None)
        if regrades:  # only regrades were stopped: the job stands as graded before them
            jobs.set_state(self.home, self.job.id, "finished", unless=("running",))
        jobs.drop_secrets(self.home, self.job.id)


def drive(home: Home, job_id: str, handle: IO[str]) -> str:
    """Drive the job with its driver lock held in `handle` (released here); why it stopped."""
    from orbit.store.locks import note_holder, release

    try:
        note_holder(jobs.driver_lock(home, job_id), f"orbit bench _drive {job_id}")
        secrets = jobs.read_secrets(home, job_id)
        driven = Home(home.root, {**home.environ, **secrets})
        try:
            driver = Driver(driven, job_id)
            driver.tasks = {t.name: t for t in driver.adapter.tasks()}
        except OrbitError as exc:  # no adapter, no benchmark: no trial can go on
            try:
                give_up(driven, job_id, f"the benchmark cannot be read: {exc}")
            except OrbitError:
                pass  # the job itself is gone
            return str(exc)
        return driver.run()
    finally:
        release(handle)


def give_up(home: Home, job_id: str, reason: str) -> None:
    """End a job that cannot be driven: its unfinished trials are invalid with `reason`."""
    for trial in load_trials(home, job_id):
        if trial.phase != "done":
            trial.phase, trial.evaluation, trial.reason, trial.score = (
                "done",
                "invalid",
                reason,
                None,
            )
            trial.updated_at = now_iso()
            save_trial(home, job_id, trial)
    jobs.set_state(home, job_id, "finished", unless=("cancelled",))
    jobs.drop_secrets(home, job_id)


def _write_phase(path: Path, phase: Phase) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(asdict(phase), indent=2) + "\n").encode())


def _read_phase(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _quiet(_: str) -> None:
    pass
