"""Run an experiment: for each planned run, its layers (LAYERS: network, machine profile,
filesystem, a fresh stack through its one lifecycle, the checks of what the load asks,
cold cache, the engine's load under the monitor, page views) entered in order and always
left in reverse (layers.Composition), then store.

Each finished run is committed at once. A server that fails is a recorded failed run and
the experiment goes on. On Ctrl-C or SIGTERM the current run is abandoned, every server
is stopped, and `--resume` later completes what is missing. A load that has ended is
not abandoned: the engine writes its report into the run's journal before it exits,
beside the run as known before the load (into room reserved before the run), so that
whatever stops stacklab after the engine's exit a resume stores the run; once the load
has returned, the whole run is journaled at once, and an interrupt waits until it is
stored.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import subprocess
import zlib
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, TypeVar

from .. import __version__
from ..host import lab
from ..agents.rules import AgentsListen, agents_problem
from ..agents.pool import AgentPool
from ..analysis.analyze import Estimate, ExperimentView, disturbed, load_view, pooled
from ..analysis.answered import answer, answered_pairs
from ..measure.drive import LoadPlan, LoadReport, engine_version, run_load
from ..env import Environment
from ..errors import (EngineError, Interrupted, LabError, NotFound, StackError, StoreError,
                     UsageError, VerificationFailed)
from ..analysis.flags import DISTURBED, flag_names
from ..host.hostinfo import git_commit, host_facts
from .capacity import CapacitySearch
from .keep import keep_logs, kept_dir
from ..knobs import KnobRegistry, setting_differences
from .layercheck import layer_verdicts
from ..layer import Layer, Place
from .layers import Composition, failed, kinds, makes
from .journaled import AFTER_THE_LOAD, before_load, from_the_journal, journaled
from .measurement import load_outcome, measure
from ..netlab.cgroups import CgroupError
from ..netlab.fs import FilesystemUnavailable, MountError, fs_type_of
from ..netlab.layers import (PLAN_ORDER, ColdCacheLayer, FilesystemLayer, MachineLayer,
                             NetworkLayer, host_memory_mb)
from ..netlab.net import NetlabError
from ..netlab.rundir import FreshDir, fresh_dir
from ..netlab.run import Network
from ..netlab.sweep import SWEEPS
from ..host.placement import parse_cpus
from ..experiment.plan import Plan, PlannedRun, Trial, effective_knobs, round_order
from .quiet import Settled, settle, wait_quiet
from .replay import replay_versions
from ..experiment.spec import ExperimentSpec, flatten
from .stack import RunningStack, Site, StackLayer
from ..stacks import COMPONENTS, STACKS, StackDef, known_slow
from ..stacks.base import RunningComponent, versions_of
from ..stacks.tls import make_certificate
from ..store import Outcome, RunRecord, Store
from ..store.records import Resources, TrialRecord
from ..host.systune import CpuAwake
from ..measure.verify import RequestChecks, Verdict, check_protocol
from ..workloads import WORKLOADS, Deployed, deploy

# A run needs room in the lab directory for its servers' logs: on a full filesystem they
# are cut silently (an access log stops growing; the error log saying so is cut too).
# Below the minimum no run starts; a run whose directory filled up (rundir.FreshDir.full)
# is failed.
LAB_MIN_FREE_MIB = 64

# The room a run's journal entry is given before its load (_kept): the servers' configs
# and the engine's histogram, and a timeseries bucket (~100 B) per second of load; and
# the room of the engine's report (its histograms and config, and the buckets): a few
# KiB for a short load. A run bounded by requests rather than time is given a minute's.
# An entry larger than its room takes the rest from the disk's own space.
ENTRY_BASE_BYTES = 64 << 10
REPORT_BASE_BYTES = 16 << 10
ENTRY_BUCKET_BYTES = 128
REQUESTS_RUN_S = 60

L = TypeVar("L")


class Progress(Protocol):
    def begin(self, total: int, done: int) -> None: ...
    def note(self, text: str) -> None: ...
    def detail(self, text: str) -> None: ...    # within a run (a capacity search's step)
    def extend(self, more: int) -> None: ...
    def run_started(self, run: PlannedRun) -> None: ...
    def run_finished(self, run: PlannedRun, record: RunRecord) -> None: ...
    def end(self) -> None: ...


# Runs measured again and disturbed again, in a row, after which the host is taken to be
# busy for good: re-measuring would only lengthen the experiment (unless --wait-quiet).
BUSY_STREAK = 3


@dataclass(frozen=True)
class Remeasure:
    """What to do with a run the host disturbed (flags.DISTURBED): measure it again, up
    to `limit` times a trial (the experiment's `remeasure`), first waiting up to
    `wait_quiet_s` for the host's other work to stop (0: no wait)."""

    limit: int = 2
    wait_quiet_s: float = 0.0


@dataclass
class RunContext:
    """What every run of one experiment shares."""

    exp_id: int
    spec: ExperimentSpec
    registry: KnobRegistry
    store: Store
    session: lab.Session
    results_dir: Path               # where the runs' logs are kept (one per results DB)
    versions: dict[str, str]
    tls: tuple[Path, Path]          # the lab's certificate and key
    system: dict                    # system settings held during the runs (systune)
    clock: Callable[[], str]        # the Environment's: time stamps of the runs
    deployed: dict[str, Deployed] = field(default_factory=dict)
    other_labs: list[dict] = field(default_factory=list)   # live at the last check
    remeasure: Remeasure = field(default_factory=Remeasure)
    remeasured: dict[str, int] = field(default_factory=dict)   # trial id -> runs again
    taken: set[tuple[str, int]] = field(default_factory=set)   # (trial, repetition) used
    again_runs: dict[str, set[int]] = field(default_factory=dict)  # repetitions made again
    busy_streak: int = 0          # runs made again that were disturbed too, in a row
    resume_command: str = ""      # what completes the experiment, as an error says it
    landed: Callable[[RunRecord], None] | None = None   # the current run's (_kept)
    # the current run's before its load (_kept): where its engine writes its report
    pending: Callable[[RunRecord], Path | None] | None = None
    # The user's --allow-remote (the command line only): the engine may load a host that
    # is not loopback, a server stacklab did not start (its own rule, target.rs)
    allow_remote: bool = False
    agents: AgentPool | None = None   # the experiment's load agents (load.agents)
    agents_listen: AgentsListen | None = None   # the user's --agents-listen
    # what a run says while it goes (a capacity search's steps): Progress.detail
    say: Callable[[str], None] = lambda text: None


def plan_hash(plan: Plan) -> str:
    ids = sorted(f"{r.trial.id}:{r.repetition}" for r in plan.runs)
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def run_experiment(env: Environment, spec: ExperimentSpec, plan: Plan,
                   registry: KnobRegistry, store: Store, results_dir: Path, resume: bool,
                   progress: Progress, anew_if_changed: bool = False,
                   wait_quiet_s: float = 0.0, resume_command: str | None = None,
                   allow_remote: bool = False, agents_listen: AgentsListen | None = None
                   ) -> int:
    """Run every planned run not yet stored, in a lab session under env's lab root with
    env's clock; return the experiment id. A resume is refused when the stored runs ran
    otherwise than the rest would (changed_since), or, with `anew_if_changed` (a study
    resuming its steps by itself), becomes a new experiment, saying why.
    `resume_command`: the command an interrupted run's error tells the user to complete
    it with, as they gave it (their --db) [default: `stacklab run SPEC --resume`].
    `allow_remote`: the user's --allow-remote, handed to the engine. `agents_listen`:
    the user's --agents-listen (load.agents from other hosts)."""
    name = spec.experiment.name
    resume_command = resume_command or f"stacklab run {spec.path} --resume"
    with (store.experiment_lock(name),
          CpuAwake() if spec.experiment.keep_cpus_awake else nullcontext(CpuAwake()) as cpus):
        system = cpus.state()
        versions = _versions(plan, registry)
        status = _status(store, name) if resume else None
        exp_id = _experiment_for(spec, plan, store, resume, system, env.clock)
        # runs measured before the database refused them, or stacklab stopped
        store.replay_journal(exp_id, from_the_journal)
        if resume and _more_to_run(spec, plan, store, exp_id) and (
                change := changed_since(store, exp_id, plan, registry, versions,
                                        spec.observe)):
            store.set_status(exp_id, status or "interrupted")     # as it was
            if not anew_if_changed:
                raise StoreError(f"--resume: experiment {name!r} (id {exp_id}): {change}, so "
                                 "the runs still to come would not measure what the stored "
                                 "ones did; run without --resume to start anew (the stored "
                                 "runs stay)")
            progress.note(f"{name}: not resumed, started anew: {change}")
            exp_id = _experiment_for(spec, plan, store, False, system, env.clock)
        _run_all(env, spec, plan, registry, store, results_dir, progress, exp_id, system,
                 versions, Remeasure(spec.experiment.remeasure, wait_quiet_s), resume_command,
                 allow_remote, agents_listen)
    return exp_id


def observed(knobs: dict[str, dict], observe: dict[str, object]) -> dict[str, dict]:
    """A run's effective knobs with what it watches (ExperimentSpec.observe, knob key ->
    value) applied: recorded with the run, outside its trial's definition."""
    out = {owner: dict(values) for owner, values in knobs.items()}
    for key, value in observe.items():
        owner, name = key.split(".", 1)
        out.setdefault(owner, {})[name] = value
    return out


def unobserved(knobs: dict[str, dict], observe: Iterable[str]) -> dict[str, dict]:
    """The knobs without the watched ones (`observe`: knob keys)."""
    drop = {tuple(key.split(".", 1)) for key in observe}
    return {owner: {n: v for n, v in values.items() if (owner, n) not in drop}
            for owner, values in knobs.items()}


def _status(store: Store, name: str) -> str | None:
    try:
        return store.experiment(name).status
    except NotFound:
        return None        # _experiment_for says so


def _more_to_run(spec: ExperimentSpec, plan: Plan, store: Store, exp_id: int) -> bool:
    """Whether a resume would measure anything: a planned run not stored, or rounds an
    automatic experiment may add."""
    done = store.done(exp_id)
    return spec.experiment.auto or any((r.trial.id, r.repetition) not in done
                                       for r in plan.runs)


def changed_since(store: Store, exp_id: int, plan: Plan, registry: KnobRegistry,
                  versions: dict[str, str], observe: Iterable[str] = ()) -> str | None:
    """How the experiment's stored runs differ from the ones its plan would run now — a
    trial's effective settings (a default changed between stacklab versions), or a
    component's version (a package upgraded) — or None. Trial ids come from the spec,
    so neither changes them: a resume would pool both kinds in one trial. What the runs
    watch (`observe`: ExperimentSpec.observe's keys, a restarted server's new pid) is
    not a setting, and is not compared."""
    trials = {t.id: t for t in plan.trials}
    now: dict[str, dict] = {}
    for run in store.runs(exp_id):
        trial = trials.get(run.trial_id)
        if trial is None:
            continue
        if trial.id not in now:     # as stored: JSON, so tuples compare as lists
            now[trial.id] = json.loads(json.dumps(
                effective_knobs(registry, STACKS[trial.stack], trial)))
        if differ := setting_differences(unobserved(run.knobs, observe),
                                         unobserved(now[trial.id], observe)):
            return f"{trial.label()}: {differ[0].said()}"
        for name, then in sorted(run.versions.items()):
            if name in versions and versions[name] != then:
                return (f"{name} was {then} when its runs were measured and is "
                        f"{versions[name]} now")
    return None


def _run_all(env: Environment, spec: ExperimentSpec, plan: Plan, registry: KnobRegistry,
             store: Store, results_dir: Path, progress: Progress, exp_id: int,
             system: dict, versions: dict[str, str], remeasure: Remeasure,
             resume_command: str, allow_remote: bool = False,
             agents_listen: AgentsListen | None = None) -> None:
    done = store.done(exp_id)
    todo = [r for r in plan.runs if (r.trial.id, r.repetition) not in done]
    try:
        with lab.session_scope(env.lab_root, sweeps=SWEEPS) as session:
            ctx = RunContext(exp_id, spec, registry, store, session, results_dir,
                             versions, make_certificate(session.dir), system,
                             env.clock, remeasure=remeasure,
                             taken=done | {(r.trial.id, r.repetition) for r in plan.runs},
                             remeasured=_made_again(store, exp_id),
                             resume_command=resume_command, allow_remote=allow_remote,
                             agents_listen=agents_listen, say=progress.detail)
            progress.begin(len(plan.runs), len(plan.runs) - len(todo))
            try:
                if todo or spec.experiment.auto:     # else nothing would load through them
                    ctx.agents = _agent_pool(ctx, plan.runs, progress)
                for run in todo:
                    _run_and_store(ctx, run, progress)
                while spec.experiment.auto and (more := more_rounds(spec, plan, store, exp_id)):
                    progress.extend(len(more))
                    for run in more:
                        _run_and_store(ctx, run, progress)
            finally:
                _close_agents(ctx, progress)
                progress.end()
        store.set_status(exp_id, "complete")
    except KeyboardInterrupt:
        _mark_interrupted(store, exp_id)
        raise Interrupted("interrupted: finished runs are stored; "
                          f"`{resume_command}` completes the rest") from None
    except BaseException:
        _mark_interrupted(store, exp_id)   # resumable; the error says why
        raise


def agents_asked(registry: KnobRegistry, runs: Iterable[PlannedRun]) -> dict[str, int]:
    """The most load agents (load.agents) any of the runs asks, by stack."""
    asked: dict[str, int] = {}
    for r in runs:
        n = effective_knobs(registry, STACKS[r.trial.stack], r.trial)["load"].get("agents", 0)
        asked[r.trial.stack] = max(asked.get(r.trial.stack, 0), n)
    return asked


def check_agent_hosts(asked: dict[str, int], listen: AgentsListen | None) -> None:
    """Agents on other hosts (--agents-listen) reach only a server the user runs
    ([external]); local ones only a stack stacklab starts (they cannot reach this host's
    loopback): a UsageError before anything starts otherwise."""
    count = max(asked.values(), default=0)
    started = sorted(s for s, n in asked.items() if n and s != "external")
    if listen and not count:
        raise UsageError(f"--agents-listen {listen.address}: no trial sets load.agents")
    if listen and started:
        raise UsageError(f"--agents-listen {listen.address}: agents on other hosts cannot "
                         f"reach stack {started[0]!r} (stacklab's stacks listen on loopback "
                         "or in the lab's namespaces); use it with an [external] server")
    if not listen and asked.get("external"):
        raise UsageError("load.agents with an [external] server: give --agents-listen "
                         "HOST:PORT and start a Dask worker on each load host")


def _agent_pool(ctx: RunContext, runs: Iterable[PlannedRun], progress: Progress
                ) -> AgentPool | None:
    """The load agents the plan's runs ask for (the most any asks, load.agents; all of
    them, not only those left: more rounds may come of any trial), made once for the
    experiment: local ones, each in a namespace of its own, or with the
    user's --agents-listen the workers that join from other hosts; None when none asks."""
    asked = agents_asked(ctx.registry, runs)
    check_agent_hosts(asked, ctx.agents_listen)
    count = max(asked.values(), default=0)
    if not count:
        return None
    if listen := ctx.agents_listen:
        pool = AgentPool.external(listen.address, count, listen.wait_s, progress.note)
        where = "joined from " + ", ".join(sorted({a.address or a.name
                                                   for a in pool.agents}))
    else:
        pool = AgentPool.local(count, ctx.session.dir, ctx.session.layer_id("agents"))
        where = "each in a network namespace of its own"
    progress.note(f"{count} load agent(s) joined: "
                  f"{', '.join(a.name for a in pool.agents)}, {where}")
    return pool


def _close_agents(ctx: RunContext, progress: Progress) -> None:
    """The experiment's agents stopped and their namespaces gone; a failure here is said,
    not raised over the experiment's own ending (an interrupt, an error)."""
    if ctx.agents is None:
        return
    try:
        ctx.agents.close()
    except (NetlabError, OSError) as e:
        progress.note(f"load agents not closed cleanly ({e}); the next session's sweep "
                      "removes what is left")


def _mark_interrupted(store: Store, exp_id: int) -> None:
    """Best effort: when the database itself is what failed, its error is the one to show
    (`--resume` works whatever the status says)."""
    try:
        store.set_status(exp_id, "interrupted")
    except StoreError:
        pass


def _run_and_store(ctx: RunContext, run: PlannedRun, progress: Progress) -> None:
    free = lab.free_mib(ctx.session.dir)
    if free < LAB_MIN_FREE_MIB:
        raise LabError(f"lab directory {ctx.session.root} has {free:.1f} MiB free, below the "
                       f"{LAB_MIN_FREE_MIB} MiB a run needs for its servers' logs (a full "
                       "disk cuts them silently): free some space, then "
                       f"`{ctx.resume_command}`")
    _check_other_labs(ctx, progress)
    progress.run_started(run)
    with _kept(ctx, run):
        record = execute_run(ctx, run)
        ctx.store.add_run(record)      # committed at once; then a held interrupt lands
    ctx.taken.add((run.trial.id, run.repetition))
    progress.run_finished(run, record)
    if again := _again(ctx, run, record, progress):
        progress.extend(1)
        _run_and_store(ctx, again, progress)


@contextmanager
def _kept(ctx: RunContext, run: PlannedRun) -> Iterator[None]:
    """A run's load kept from the moment its engine exits until the run is stored: its
    journal rooms reserved before the run (a disk filling meanwhile cannot keep it out);
    just before the load, the run as known then journaled (`pending`), beside the room
    the engine writes its report into, synced, before it exits (a kill -9 or an
    interrupt from then on leaves what `--resume` stores); once the load returns, the
    whole entry written and synced and interrupts held until the commit (a SIGTERM
    during the counters, the stop and the lab's teardown waits for it, then interrupts
    as usual)."""
    key = (ctx.exp_id, run.trial.id, run.repetition)
    seconds = min(3600, ctx.spec.experiment.duration or REQUESTS_RUN_S)
    try:
        buckets = int(seconds) * ENTRY_BUCKET_BYTES
        ctx.store.reserve(*key, ENTRY_BASE_BYTES + buckets, REPORT_BASE_BYTES + buckets)
    except StoreError as e:
        raise StoreError(f"{e}, then `{ctx.resume_command}`") from None
    with ExitStack() as held:
        def landed(record: RunRecord) -> None:
            held.enter_context(lab.interrupts_held())
            ctx.store.landed(record)
        ctx.landed, ctx.pending = landed, ctx.store.pending
        try:
            yield
        except BaseException:
            ctx.store.unreserve(*key)      # a load that ended stays in the journal
            raise
        finally:
            ctx.landed = ctx.pending = None


def _before_load(ctx: RunContext, run: PlannedRun, started_at: str, knobs: dict,
                 running: RunningStack, verdicts: tuple[Verdict, ...]) -> RunRecord:
    return before_load(ctx.exp_id, run.trial.id, run.repetition, started_at, knobs,
                       ctx.versions, running.files(), verdicts)


def _pending(ctx: RunContext, run: PlannedRun, started_at: str, knobs: dict,
             running: RunningStack, verdicts: tuple[Verdict, ...]) -> Path | None:
    """Hand the run as known before its load to the current run's keeper (_kept); where
    the engine is to write its report (None: nowhere, the load kept once it returns)."""
    if ctx.pending is None:
        return None
    return ctx.pending(_before_load(ctx, run, started_at, knobs, running, verdicts))


def _landed(ctx: RunContext, run: PlannedRun, started_at: str, knobs: dict,
            running: RunningStack, verdicts: tuple[Verdict, ...], load: LoadReport) -> None:
    """Hand the run as its load left it to the current run's keeper (_kept): the record a
    resume stores if the process ends before the whole one is (its resources, counters
    and logs are read after the load)."""
    if ctx.landed is None:
        return
    ctx.landed(journaled(_before_load(ctx, run, started_at, knobs, running, verdicts), load,
                         running.alive(), ctx.clock(), AFTER_THE_LOAD))


def _made_again(store: Store, exp_id: int) -> dict[str, int]:
    """Per trial, how many runs were made again so far, as the stored ones tell: each
    disturbed run was followed by one while the allowance lasted (fewer when the host
    was taken as busy for good), so a resume does not get a fresh allowance."""
    out: dict[str, int] = {}
    for run in store.runs(exp_id):
        if disturbed(run):
            out[run.trial_id] = out.get(run.trial_id, 0) + 1
    return out


def _again(ctx: RunContext, run: PlannedRun, record: RunRecord,
           progress: Progress) -> PlannedRun | None:
    """The same trial measured again when the host disturbed this run (flags.DISTURBED),
    within the experiment's limit: the disturbed run stays stored with its flags and is
    set aside (analyze.pooled) while enough undisturbed runs remain."""
    trial = run.trial
    if not disturbed(record):
        ctx.busy_streak = 0            # the host went quiet: re-measure again if need be
    elif run.repetition in ctx.again_runs.get(trial.id, ()):   # a run made again
        ctx.busy_streak += 1
        if ctx.busy_streak == BUSY_STREAK and not ctx.remeasure.wait_quiet_s:
            progress.note(f"{BUSY_STREAK} runs measured again were disturbed as well: the "
                          "host stays busy, so no more are (each verdict is judged against "
                          "the disturbance measured; --wait-quiet waits for a quiet host)")
    if (not disturbed(record) or ctx.remeasured.get(trial.id, 0) >= ctx.remeasure.limit
            or (ctx.busy_streak >= BUSY_STREAK and not ctx.remeasure.wait_quiet_s)):
        return None
    ctx.remeasured[trial.id] = ctx.remeasured.get(trial.id, 0) + 1
    flags = ", ".join(f for f in record.flags if f in DISTURBED)
    note = (f"{trial.label()} #{run.repetition} was disturbed ({flags}): measured again "
            f"({ctx.remeasured[trial.id]} of at most {ctx.remeasure.limit})")
    progress.note(note)
    if ctx.remeasure.wait_quiet_s > 0:        # says when it waits, and how that ended
        wait_quiet(ctx.remeasure.wait_quiet_s, say=progress.note)
    repetition = 1 + max(rep for t, rep in ctx.taken if t == trial.id)
    ctx.again_runs.setdefault(trial.id, set()).add(repetition)
    return PlannedRun(trial, repetition)


def _check_other_labs(ctx: RunContext, progress: Progress) -> None:
    """Another stacklab measuring on this machine competes for its CPUs: say so when one
    appears; each run records those live around it."""
    seen = {o["dir"] for o in ctx.other_labs}
    ctx.other_labs = lab.other_labs(ctx.session)
    for other in ctx.other_labs:
        if other["dir"] not in seen:
            progress.note(f"another stacklab (pid {other['pid']}) is running on this machine "
                          f"({other['dir']}): the two measure each other; recorded with "
                          "each run")


def more_rounds(spec: ExperimentSpec, plan: Plan, store: Store, exp_id: int) -> list[PlannedRun]:
    """repetitions = "auto": one more round of the trials of every comparison the answers
    make (analysis.answered) that is not yet decided — better, worse, or the same within
    the margin, judged at the level that keeps its 95% under this stopping
    (analyze.sure_of) — and of every trial in no comparison whose req/s CI is still wider
    than ci_target; never past max_repetitions. A comparison left without a verdict for
    a reason more rounds do not change (a limited side, no data) adds none."""
    e = spec.experiment
    last: dict[str, int] = {}
    runs: dict[str, list[RunRecord]] = {}
    everything = list(store.runs(exp_id))
    for r in everything:
        last[r.trial_id] = max(last.get(r.trial_id, 0), r.repetition)
        runs.setdefault(r.trial_id, []).append(r)

    def room(trial_id: str) -> bool:
        mine = runs.get(trial_id, [])
        counted = [r for r in mine if not disturbed(r)]    # runs measured again: once
        return (len(counted) < e.max_repetitions
                and len(mine) < e.max_repetitions + e.remeasure)

    undecided, compared = undecided_pairs(load_view(store, exp_id))
    wanted = {t for pair in undecided for t in pair if all(map(room, pair))}
    out = []
    for t in round_order(plan.trials, 1 + max(last.values(), default=0)):
        mine = runs.get(t.id, [])
        if t.id in compared:
            if t.id in wanted:
                out.append(PlannedRun(t, last.get(t.id, 0) + 1))
            continue
        if not room(t.id):
            continue
        rps = [r.load.rps for r in pooled(mine, everything)]
        if not rps and len([r for r in mine if not disturbed(r)]) >= e.first_repetitions:
            continue                   # only failures: more runs would not narrow anything
        hw = Estimate.of(rps).half_width
        if hw is None or hw > e.ci_target:
            out.append(PlannedRun(t, last.get(t.id, 0) + 1))
    return out


# No verdict yet, for want of rounds: more of them can decide it.
NARROWED_BY_ROUNDS = ("imprecise", "few-runs")


def undecided_pairs(view: ExperimentView) -> tuple[list[tuple[str, str]], set[str]]:
    """The comparisons the answers make that more rounds could still decide (on the
    metric that answers: no verdict, imprecise or too few runs), as trial ids; and
    every trial compared."""
    undecided, compared = [], set()
    for a, b in answered_pairs(view):
        compared |= {a.trial_id, b.trial_id}
        d = answer(a, b).decision
        if d.kind == "no-verdict" and d.reason in NARROWED_BY_ROUNDS:
            undecided.append((a.trial_id, b.trial_id))
    return undecided, compared


def plan_changes(stored: list[TrialRecord], plan: Plan, stored_reps: Any, reps: Any,
                 most: int = 3) -> str:
    """What differs between a stored experiment's trials and this plan's: each definition
    key whose values differ ("measure.duration_s: 3.0 → 2.0"), else the repetitions."""
    def values(definitions: Iterable[dict]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for d in definitions:
            for key, value in flatten(d).items():
                out.setdefault(key, set()).add(repr(value))
        return out

    old = values(t.definition for t in stored)
    new = values(t.definition() for t in plan.trials)
    said = [f"{k}: {', '.join(sorted(old.get(k, {'—'})))} → "
            f"{', '.join(sorted(new.get(k, {'—'})))}"
            for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    if not said:
        return (f"experiment.repetitions: {stored_reps} → {reps}" if stored_reps != reps
                else "the same trials, other runs")
    more = f"; and {len(said) - most} more" if len(said) > most else ""
    return "; ".join(said[:most]) + more


def _experiment_for(spec: ExperimentSpec, plan: Plan, store: Store, resume: bool,
                    system: dict, clock: Callable[[], str]) -> int:
    name = spec.experiment.name
    digest = plan_hash(plan)
    if resume:
        try:
            row = store.experiment(name)
        except NotFound:
            raise StoreError(f"--resume: no earlier experiment {name!r} to resume") from None
        if row.spec_hash != digest:
            changed = plan_changes(store.trials(row.id), plan,
                                   row.spec.get("experiment", {}).get("repetitions"),
                                   spec.experiment.repetitions)
            raise StoreError(f"--resume: experiment {name!r} (id {row.id}) was planned "
                             f"from a different spec ({changed}); run without --resume "
                             f"to start anew")
        store.set_status(row.id, "running")
        return row.id
    trials = [(t.id, t.label(), t.definition()) for t in plan.trials]
    spec_doc = json.loads(spec.model_dump_json())
    return store.new_experiment(name, spec.path, digest, spec_doc, trials,
                                {**host_facts(), **system},
                                __version__, git_commit(), clock())


def _versions(plan: Plan, registry: KnobRegistry) -> dict[str, str]:
    """Every component's versions as its trials' knobs have it (Component.versions: its
    own, and the runtimes those knobs load); what their workloads serve and their loads
    replay (_content_versions); the engine's and stacklab's."""
    knobs = {t.id: effective_knobs(registry, STACKS[t.stack], t) for t in plan.trials}
    used = sorted(((COMPONENTS[name], knobs[t.id][name]) for t in plan.trials
                   for name in STACKS[t.stack].components), key=lambda pair: pair[0].name)
    versions = versions_of(used) | _content_versions(plan, knobs)
    versions["stacklab-load"] = engine_version()
    versions["stacklab"] = __version__
    return versions


def _content_versions(plan: Plan, knobs: dict[str, dict[str, dict]]) -> dict[str, str]:
    """What the trials' workloads serve (Workload.versions: a real application's packages,
    the hash of a dir:'s files) and the hash of the log their loads replay, each asked
    once: a resume refuses to pool runs of other content (changed_since), as of an
    upgraded server. A stack that serves its own content (_target) deploys none."""
    out: dict[str, str] = {}
    for name in sorted({t.workload for t in plan.trials if _target(STACKS[t.stack]) is None}):
        out |= WORKLOADS[name].versions()
    for log in {knobs[t.id]["load"].get("replay") or "" for t in plan.trials} - {""}:
        out |= replay_versions(log)
    return dict(sorted(out.items()))


@dataclass(eq=False)
class RunScope:
    """What one run's layers are made from (LAYERS): the experiment's context, the run,
    its effective knobs, the stack it starts and its directory, where its lab layers are
    made, and the layers made so far, outermost first (the ones a later layer reads)."""

    ctx: RunContext
    run: PlannedRun
    knobs: dict[str, dict]
    running: RunningStack
    run_dir: Path
    place: Place
    started_at: str
    made: list[Layer] = field(default_factory=list)
    composition: Composition | None = None

    def layer(self, kind: type[L]) -> L:
        """The layer of that kind made before this one (the first, outermost)."""
        return next(made for made in self.made if isinstance(made, kind))

    def compose(self, factories: tuple[Callable[[RunScope], Layer], ...]) -> Composition:
        for make in factories:
            self.made.append(make(self))
        self.composition = Composition(self.made, self.running.stack.name)
        return self.composition


@dataclass(eq=False)
class Measurement:
    """An experiment run's measurement, the innermost layer but the page views: the
    engine's load (closed loop at the trial's concurrency for the experiment's duration or
    requests, or open loop at load.rate) under the monitor, taken when entered, with the
    system settings, the lab's own writeback settled first and the other labs seen
    meanwhile. Its record is the measured window's resources (measurement.measure); its
    plan rule is the engine's threads against its CPUs (problem)."""

    scope: RunScope
    name = "load"
    waits = False
    load: LoadReport | None = None
    resources: dict = field(default_factory=dict)

    @classmethod
    def problem(cls, knobs: dict[str, dict]) -> str | None:
        """More engine threads than the CPUs `load.cpus` allows would share those CPUs,
        and the generator-bound check (busy time per thread) could no longer see a
        saturated engine: refused. Unpinned, or threads = 0 (one per usable CPU), is
        always fine. Local load agents (load.agents) need veth (agents_problem)."""
        if problem := agents_problem(knobs):
            return problem
        load = knobs["load"]
        if not load.get("cpus") or not load.get("threads"):
            return None
        cpus = len(parse_cpus(load["cpus"]))
        if load["threads"] <= cpus:
            return None
        return (f"load.threads = {load['threads']} is more than the {cpus} CPU(s) "
                f"load.cpus = {load['cpus']!r} allows: the engine's busy share could not "
                "show it saturated")

    @contextmanager
    def entered(self) -> Iterator[LoadReport]:
        settled = settle()     # the previous run's writeback is not this run's
        plan = replace(self.plan(), report_file=self.pending())
        self.load, self.resources = self.measured(plan, settled, self.landed())
        yield self.load

    def plan(self) -> LoadPlan:
        """The trial's load as the engine is given it: at the front's endpoint, from the
        client's namespace, with the headers the checks resolved."""
        s, ctx = self.scope, self.scope.ctx
        net = s.layer(NetworkLayer).network
        deployed = s.layer(FilesystemLayer).deployed
        return replace(_load_plan(ctx.spec, s.run.trial, s.knobs["load"], deployed,
                                  s.running.front),
                       netns=net.client_ns, headers=(*deployed.headers,
                                                     *s.layer(RequestChecks).requests.headers),
                       allow_remote=ctx.allow_remote)

    def pending(self) -> Path | None:
        """The run as known before its load, journaled (the runner's _kept); where the
        engine is to write its report so that the run is kept from its exit on."""
        s = self.scope
        return _pending(s.ctx, s.run, s.started_at, s.knobs, s.running,
                        s.composition.verdicts)

    def landed(self) -> Callable[[LoadReport], None]:
        """What keeps the run's load the moment it returns (the runner's _kept)."""
        s = self.scope
        return partial(_landed, s.ctx, s.run, s.started_at, s.knobs, s.running,
                       s.composition.verdicts)

    def measured(self, plan: LoadPlan, settled: Settled,
                 landed: Callable[[LoadReport], None] | None = None
                 ) -> tuple[LoadReport, dict]:
        """One load of `plan` under the monitor, and its window's resources with the
        system settings, the other labs seen meanwhile and the writeback settled before."""
        s, ctx = self.scope, self.scope.ctx
        counters = {**s.layer(MachineLayer).counters(), **_own_counters(s.running)}
        network = s.layer(NetworkLayer).network
        load, resources = measure(plan, s.running, s.knobs, s.run_dir, network.server_ns,
                                  counters, landed, self.load_with(network))
        others = {o["dir"]: o for o in ctx.other_labs + lab.other_labs(ctx.session)}
        resources["_system"] = {**ctx.system, "other_labs": list(others.values())}
        # what the run writes (PHP's file sessions, logs) goes to the lab root's
        # filesystem: on disk a session costs 260-370 µs in the kernel, on tmpfs 13
        resources["_host"] = {**resources.get("_host", {}), **settled.record(),
                              "run_dir_fs": fs_type_of(s.run_dir)}
        return load, resources

    def load_with(self, network: Network) -> Callable[[LoadPlan, Path], LoadReport]:
        """What runs the load: the one engine, or with load.agents the experiment's
        agents, joined to this run's server namespace first."""
        count = self.scope.knobs["load"].get("agents", 0)
        pool = self.scope.ctx.agents
        if not count:
            return run_load
        if pool is None:
            raise EngineError(f"load.agents = {count}: no load agents were started")
        if network.link is not None:
            pool.attach(network.link.server_ns, network.link.server_addr, count)
        return partial(pool.run_load, count=count)

    def verdicts(self) -> tuple[Verdict, ...]:
        return ()

    def record(self) -> dict:
        return self.resources


def _own_counters(running: RunningStack) -> dict[str, Callable[[], float | None]]:
    """CPU-time readers of the components that count their own (Component.cpu_counter:
    a server stacklab did not start, watched by its cgroup), by label."""
    return {s.label: reader for s in running.started
            if (reader := COMPONENTS[s.name].cpu_counter(s)) is not None}


@makes(Measurement)
def _measurement(s: RunScope) -> Layer:
    """The trial's load, or, in an experiment with [capacity], a capacity search made of
    such loads (capacity.CapacitySearch) under the same plan rule."""
    if (goal := s.ctx.spec.capacity) is None:
        return Measurement(s)
    return CapacitySearch(Measurement(s), goal, s.ctx.spec.experiment.warmup, say=s.ctx.say)


@makes(NetworkLayer)
def _network(s: RunScope) -> Layer:
    return NetworkLayer(s.knobs["net"], s.place)


@makes(MachineLayer)
def _machine(s: RunScope) -> Layer:
    return MachineLayer(s.knobs["machine"], s.place, s.running)


@makes(FilesystemLayer)
def _filesystem(s: RunScope) -> Layer:
    return FilesystemLayer(s.knobs["fs"], _served(s), s.place, s.running)


@makes(StackLayer)
def _stack(s: RunScope) -> Layer:
    net, machine, fs = s.layer(NetworkLayer), s.layer(MachineLayer), s.layer(FilesystemLayer)
    return StackLayer(s.running, s.knobs, s.run_dir, lambda: fs.deployed,
                      lambda: Site(net.network.host, machine.machine.join()), s.ctx.tls,
                      s.ctx.session.cache())


@makes(RequestChecks)
def _requests(s: RunScope) -> Layer:
    fs = s.layer(FilesystemLayer)
    return RequestChecks(lambda: s.running.front.endpoint,
                         lambda: (path for path, _ in fs.deployed.urls), s.knobs["load"])


@makes(ColdCacheLayer)
def _cold_cache(s: RunScope) -> Layer:
    return ColdCacheLayer(s.knobs, s.layer(FilesystemLayer))


def _page_view_layer() -> type[Layer]:
    """requests (pageview.py's client) is imported here, where a run or its plan needs
    it, not at every start."""
    from .pageview import PageViewLayer
    return PageViewLayer


@makes(_page_view_layer)
def _page_views(s: RunScope) -> Layer:
    net, fs, layer = s.layer(NetworkLayer), s.layer(FilesystemLayer), _page_view_layer()
    return layer(lambda: s.running.front.endpoint.base_url, lambda: fs.deployed,
                 lambda: net.network.client_ns)


# An experiment's run, outermost layer first: each made for the run from what it knows
# and the layers made before it; entered in this order, left in reverse. The page views
# are a view after the measured window, so inside the measurement. Each factory is a
# layer class or names its class (layers.makes): a plan is checked against every one's
# rule (plan_rules), so a new layer is one factory here.
LAYERS: tuple[Callable[[RunScope], Layer], ...] = (
    _network, _machine, _filesystem, _stack, _requests, _cold_cache, _measurement,
    _page_views)


def plan_rules() -> tuple[type[Layer], ...]:
    """The classes of the run's layers (LAYERS) in the order a plan is checked against
    their rules (Layer.problem, by validate_plan): the lab's first, in their own order
    (netlab.layers.PLAN_ORDER: a trial several refuse is refused for the first), then the
    others outermost first."""
    made = kinds(LAYERS)
    return (*(k for k in PLAN_ORDER if k in made), *(k for k in made if k not in PLAN_ORDER))


def execute_run(ctx: RunContext, run: PlannedRun) -> RunRecord:
    """One run in a directory of its own on a fresh filesystem (rundir.fresh_dir: a
    tmpfs, or fs.type's), so that no run starts from what an earlier one did to a disk:
    mounted before its layers, removed once its logs are kept. Where its writable
    directories were is its record's `_writable`."""
    trial = run.trial
    knobs = observed(effective_knobs(ctx.registry, STACKS[trial.stack], trial),
                     ctx.spec.observe)
    name = lab.run_name(trial.id, run.repetition)
    place = Place(ctx.session.layer_id(name), ctx.session.dir)
    with fresh_dir(place.run_id, place.state_dir, ctx.session.run_dir(name), knobs,
                   host_memory_mb()) as fresh:
        record = _execute_in(ctx, run, knobs, place, fresh)
    lab_parts = record.resources.lab
    writable = {**fresh.writable.record(), **lab_parts.get("writable", {})}
    return replace(record, resources=Resources(record.resources.components,
                                               {**lab_parts, "writable": writable}))


def _execute_in(ctx: RunContext, run: PlannedRun, knobs: dict, place: Place,
                fresh: FreshDir) -> RunRecord:
    """One run: its layers (LAYERS) entered in order — the stack, the lab's conditions
    and checks around the measurement — and always left in reverse. Failures become data:
    a FAIL is an invalid run, a server or engine that breaks (or a stack that does not
    stop cleanly, or whose directory filled up) a failed one."""
    trial = run.trial
    name = lab.run_name(trial.id, run.repetition)
    run_dir = fresh.dir
    kept = kept_dir(ctx.results_dir / str(ctx.exp_id), name, ctx.clock)
    started_at = ctx.clock()
    running = RunningStack(STACKS[trial.stack])
    outcome, reason, tail = Outcome.OK, None, None
    verdicts: tuple[Verdict, ...] = ()
    resources = Resources()
    flags: tuple[str, ...] = ()
    scope = RunScope(ctx, run, knobs, running, run_dir, place, started_at)
    try:
        with scope.compose(LAYERS).entered() as composed:
            resources = Resources.from_json(composed.record())
            outcome, reason, verdicts, flags = _judged(scope, resources)
    except VerificationFailed as e:
        outcome, reason, verdicts = Outcome.INVALID, e.reason, e.verdicts
    except StackError as e:
        if outcome is Outcome.OK:      # a start failure, or a stop failing a measured run
            outcome, reason, tail = Outcome.FAILED, str(e), e.log_tail
            verdicts = verdicts or _given(scope)
        else:                          # a stop failing a run already judged: say both
            reason = f"{reason}; and stopping the stack: {e}"
    except (EngineError, NetlabError, MountError, FilesystemUnavailable, CgroupError) as e:
        outcome, reason, verdicts = Outcome.FAILED, str(e), verdicts or _given(scope)
    except (OSError, http.client.HTTPException, ValueError, zlib.error,
            subprocess.SubprocessError) as e:
        # a server that dies, resets or answers garbage while being verified or loaded
        outcome, reason = Outcome.FAILED, f"{type(e).__name__}: {e}"
        verdicts = verdicts or _given(scope)
    if outcome is not Outcome.INVALID and (full := fresh.full()):
        outcome, reason = Outcome.FAILED, (f"{reason}; {full}" if reason else full)
    if outcome is Outcome.FAILED and not tail:
        tail = running.log_tail()
    if note := keep_logs(run_dir, kept):        # the run is stored all the same
        reason, kept = (f"{reason}; {note}" if reason else note), None
    return RunRecord(experiment_id=ctx.exp_id, trial_id=trial.id, repetition=run.repetition,
                     outcome=outcome, reason=reason, started_at=started_at,
                     ended_at=ctx.clock(), knobs=knobs, versions=ctx.versions,
                     configs=running.files(), verdicts=verdicts, load=_load(scope),
                     resources=resources, flags=flags, log_tail=tail,
                     run_dir=kept and str(kept))


def _judged(scope: RunScope, resources: Resources
            ) -> tuple[Outcome, str | None, tuple[Verdict, ...], tuple[str, ...]]:
    """The run as its load left it, judged while its servers still run: its outcome
    (load_outcome), the front layers' verdicts on what they counted and, for an HTTP/2
    run, the protocol the responses came in (a FAIL among all the verdicts makes it
    invalid; a failed run whose protocol was not the one asked says so) and its flags."""
    load, running, knobs = _load(scope), scope.running, scope.knobs
    flags = tuple(flag_names(load, resources, known_slow(knobs)))
    outcome, reason = load_outcome(load, running.alive())
    checked = layer_verdicts(running.stack, resources.layers,
                             scope.layer(FilesystemLayer).deployed.cacheable, knobs)
    spoken = check_protocol(knobs["load"].get("protocol", "http/1.1"), load)
    verdicts = (*scope.composition.verdicts, *checked, *([spoken] if spoken else []))
    if outcome is Outcome.OK and (bad := failed(verdicts)):
        outcome, reason = Outcome.INVALID, "; ".join(f"{v.component} {v.check}: {v.detail}"
                                                     for v in bad)
    elif spoken and failed((spoken,)):
        reason = f"{reason}; {spoken.detail}"
    return outcome, reason, verdicts, flags


def _given(scope: RunScope) -> tuple[Verdict, ...]:
    """The verdicts given before a run broke (none if its layers were never made)."""
    return scope.composition.verdicts if scope.composition else ()


def _load(scope: RunScope) -> LoadReport | None:
    """The run's load, once its measurement returned (whatever broke after it)."""
    return next((m.load for m in scope.made if isinstance(m, (Measurement, CapacitySearch))),
                None)


def _served(s: RunScope) -> Deployed:
    """What the run's load asks: the trial's workload as deployed, or — for a stack whose
    component serves its own content, a server stacklab did not start (its `target`) —
    the URLs that component names, with an empty docroot (nothing is deployed)."""
    if found := _target(s.running.stack):
        name, target = found
        return target(s.knobs[name], s.ctx.session.docroot(s.run.trial.workload))
    return _deployed(s.ctx, s.run.trial.workload)


def _target(stack: StackDef) -> tuple[str, Callable[[dict, Path], Deployed]] | None:
    """The component of the stack that serves its own content (its `target`), if any."""
    for name in stack.components:
        if target := getattr(COMPONENTS[name], "target", None):
            return name, target
    return None


def _deployed(ctx: RunContext, workload: str) -> Deployed:
    if workload not in ctx.deployed:
        docroot = ctx.session.docroot(workload)
        ctx.deployed[workload] = deploy(workload, docroot, ctx.spec.experiment.seed)
    return ctx.deployed[workload]


def _load_plan(spec: ExperimentSpec, trial: Trial, load: dict, deployed: Deployed,
               front: RunningComponent) -> LoadPlan:
    base = front.endpoint.base_url
    e = spec.experiment
    return LoadPlan(tuple((base + path, w) for path, w in deployed.urls), trial.concurrency,
                    e.duration, trial.requests(e), e.warmup, load, e.seed,
                    frozenset(base + path for path in deployed.varying_length))
