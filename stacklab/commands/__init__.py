"""The application layer: one function per `stacklab` command, each taking the
Environment it runs in (stacklab/env.py) and returning its ExitStatus.

A command gathers plain data from the stages (spec, plan, runner, store, analyze …)
and hands it to report/ to be laid out on env.stdout; it never parses arguments and
never catches errors (cli.py's one boundary does both).

  listing.py   doctor, stacks, workloads: what the lab has
  run.py       run (and the whole-plan validation every measuring command shares)
  measure.py   breakdown, dbbench: S1's methods
  results.py   show, report, export, compare, recommend, export-config: stored results
"""
