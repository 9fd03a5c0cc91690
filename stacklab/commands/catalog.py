"""`stacklab list`: the experiments a results database holds. Apart from the other
result commands (commands/results.py) so that it imports only the store: it answers
before numpy, the stacks and the analysis would have loaded (bench/startup.py)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from ..env import Environment
from ..errors import ExitStatus
from ..store import stored


def list_experiments(env: Environment, db: Path | None, as_json: bool) -> ExitStatus:
    """The experiments a results database holds: id, name, status, runs, when."""
    path = env.database(db)
    with stored(path) as store:
        rows = [{"id": e.id, "name": e.name, "status": e.status, "runs": e.n_runs,
                 "created_at": e.created_at, "spec": e.spec_path}
                for e in store.experiments()]
    if as_json:
        env.stdout.print_json(data={"database": str(path), "experiments": rows})
    else:
        env.stdout.print(experiment_list_table(rows, path))
    return ExitStatus.OK


def experiment_list_table(rows: list[dict], db: Path) -> Table:
    """One line per stored experiment."""
    table = Table(title=f"experiments in {db}")
    for col in ("id", "name", "status", "runs", "created", "spec"):
        table.add_column(col, justify="right" if col in ("id", "runs") else "left")
    for r in rows:
        table.add_row(str(r["id"]), r["name"], r["status"], str(r["runs"]),
                      r["created_at"][:19].replace("T", " "), r["spec"] or "")
    return table
