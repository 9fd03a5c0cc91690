"""A run as the journal keeps it when stacklab may stop before the whole run is stored
(store/journal.py): the run as known before its load (`before_load`), journaled just
before the engine starts, and that run made whole with its load (`journaled`), either the
moment the load returns (the runner's landed) or, when stacklab stopped before it read
the engine's report, by a resume from the report the engine wrote beside it
(`from_the_journal`).

Such a run's measured window was never read (resources, counters, logs): its host is
taken as busy, unsized (a verdict sets it aside while two undisturbed runs remain).
"""

from __future__ import annotations

from dataclasses import replace

from ..analysis.flags import flag_names
from ..measure.drive import LoadReport
from ..measure.verify import Verdict
from ..stacks import known_slow
from ..store import Outcome, RunRecord
from ..store.records import Resources
from .measurement import load_outcome

AFTER_THE_LOAD = ("stored from the journal: stacklab was stopped after the load, before "
                  "the run's resources, counters and logs were read")
REPORT_UNREAD = ("stored from the journal: stacklab was stopped before it read the "
                 "engine's report (the engine finished the load and wrote it there); "
                 "whether the servers outlived the load, and the run's resources, "
                 "counters and logs, were never read")
NOT_ENDED = "its load did not end"     # the run before its load, never stored as such


def before_load(experiment_id: int, trial_id: str, repetition: int, started_at: str,
                knobs: dict, versions: dict[str, str], configs: dict[str, str],
                verdicts: tuple[Verdict, ...]) -> RunRecord:
    """The run as known before its load: all but what the load and its window give."""
    return RunRecord(experiment_id=experiment_id, trial_id=trial_id, repetition=repetition,
                     outcome=Outcome.FAILED, reason=NOT_ENDED, started_at=started_at,
                     ended_at=started_at, knobs=knobs, versions=versions, configs=configs,
                     verdicts=verdicts)


def journaled(before: RunRecord, load: LoadReport, alive: bool, ended_at: str,
              note: str) -> RunRecord:
    """`before` made whole with its load (`alive`: whether the servers outlived it),
    its window unread; `note` says why it is stored so."""
    outcome, reason = load_outcome(load, alive)
    unread = Resources(lab={"host": {"window_unread": True}})
    return replace(before, outcome=outcome, reason=f"{reason}; {note}" if reason else note,
                   ended_at=ended_at, load=load, resources=unread,
                   flags=tuple(flag_names(load, unread, known_slow(before.knobs))))


def from_the_journal(before: RunRecord, load: LoadReport, ended_at: str) -> RunRecord:
    """A run whose engine finished its load and wrote its report, stacklab stopped
    before it read it (Store.replay_journal's Completion): stored as the load left it,
    the servers taken to have outlived it (nothing read them after). An engine whose
    stacklab was killed mid-load goes on alone to the load's end: what it writes then
    is such a run too, should the resume come after it."""
    return journaled(before, load, True, ended_at, REPORT_UNREAD)
