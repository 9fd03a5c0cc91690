"""--wait-quiet says when it starts waiting for a quiet host and how the wait ended
(issue 39: it waited up to 2 minutes without a word); a host quiet at once costs one
spell and no line."""

from types import SimpleNamespace

from stacklab.experiment.plan import PlannedRun, Trial
from stacklab.run import quiet, runner


def test_a_wait_is_said_when_it_starts_and_when_the_host_went_quiet():
    said = []
    t = iter(range(100))
    busy = iter([0.9, 0.8, 0.05])
    q = quiet.wait_quiet(60, clock=lambda: next(t), reading=lambda: next(busy),
                         say=said.append)
    assert q.quiet and said == [
        "waiting up to 60 s for the host to go quiet: 0.90 cores of other work (quiet: "
        "at most 0.10)",
        f"the host went quiet after {q.seconds:.0f} s of waiting"]


def test_a_wait_that_gives_up_says_so():
    said = []
    t = iter(range(0, 1000, 50))
    q = quiet.wait_quiet(60, clock=lambda: next(t), reading=lambda: 1.25, say=said.append)
    assert not q.quiet and len(said) == 2
    assert said[1] == (f"the host stayed busy: 1.25 cores of other work after "
                       f"{q.seconds:.0f} s of waiting; measuring all the same")


def test_a_host_quiet_at_once_is_not_waited_for_in_words():
    said = []
    q = quiet.wait_quiet(60, clock=iter(range(10)).__next__, reading=lambda: 0.02,
                         say=said.append)
    assert q.quiet and said == []


def test_the_runner_says_the_run_is_measured_again_then_the_wait(monkeypatch):
    """The runner's note comes before the wait (it was printed after it), and the wait's
    own lines go to the same progress."""
    lines = []
    monkeypatch.setattr(runner, "wait_quiet", lambda max_s, say: (
        say(f"waiting up to {max_s:.0f} s"), say("the host went quiet")))
    trial = Trial("nginx", "static-page", 1, (), ())
    ctx = SimpleNamespace(busy_streak=0, again_runs={}, remeasured={}, taken={(trial.id, 1)},
                          remeasure=runner.Remeasure(2, 120.0))
    record = SimpleNamespace(flags=("host-busy",))
    again = runner._again(ctx, PlannedRun(trial, 1), record,
                          SimpleNamespace(note=lines.append))
    assert again == PlannedRun(trial, 2)
    assert lines[0].endswith("measured again (1 of at most 2)")
    assert lines[1:] == ["waiting up to 120 s", "the host went quiet"]
