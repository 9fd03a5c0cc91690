"""Versioned schema: migration N brings a database from version N-1 to N.

Append new migrations; never edit one that has shipped. `PRAGMA user_version` holds
the version a database is at.
"""

MIGRATIONS: list[str] = [
    # 1: experiments, their trials, and one row per finished run.
    """
    CREATE TABLE experiments (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        spec_path TEXT NOT NULL,
        spec_hash TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted')),
        stacklab_version TEXT NOT NULL,
        stacklab_commit TEXT,
        host_json TEXT NOT NULL
    );
    CREATE INDEX experiments_name ON experiments(name);
    CREATE TABLE trials (
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        trial_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        label TEXT NOT NULL,
        definition_json TEXT NOT NULL,
        PRIMARY KEY (experiment_id, trial_id)
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        trial_id TEXT NOT NULL,
        repetition INTEGER NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'failed', 'invalid')),
        reason TEXT,
        started_at TEXT NOT NULL,
        ended_at TEXT NOT NULL,
        knobs_json TEXT NOT NULL,
        versions_json TEXT NOT NULL,
        configs_json TEXT NOT NULL,
        verdicts_json TEXT NOT NULL,
        load_json TEXT,
        resources_json TEXT NOT NULL,
        flags_json TEXT NOT NULL,
        log_tail TEXT,
        run_dir TEXT,
        rps REAL,
        p50_us REAL,
        p99_us REAL,
        completed INTEGER,
        failed_requests INTEGER,
        engine_cpu_s REAL,
        UNIQUE (experiment_id, trial_id, repetition)
    );
    """,
    # 2: S1's overview method (`stacklab breakdown`) and database method (`stacklab dbbench`).
    """
    CREATE TABLE breakdowns (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        stack TEXT NOT NULL,
        workload TEXT NOT NULL,
        knobs_json TEXT NOT NULL,
        result_json TEXT NOT NULL,
        versions_json TEXT NOT NULL,
        host_json TEXT NOT NULL
    );
    CREATE TABLE dbbenches (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        experiment TEXT NOT NULL,
        knobs_json TEXT NOT NULL,
        loops INTEGER NOT NULL,
        result_json TEXT NOT NULL,
        versions_json TEXT NOT NULL,
        host_json TEXT NOT NULL
    );
    CREATE INDEX dbbenches_experiment ON dbbenches(experiment);
    """,
]
