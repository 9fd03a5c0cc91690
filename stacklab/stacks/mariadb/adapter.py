"""MariaDB (mariadbd) from our own my.cnf (`--defaults-file`, never /etc/mysql), on a unix
socket in the lab's short socket directory (lab.socket_path), over a datadir seeded once
per experiment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...host import lab
from ...host.net import Endpoint, socket_ready
from .. import userconf
from ..base import Capability, Component, RenderContext, RunningComponent, SqlClient
from ..templates import render_template
from . import configtest
from .client import Client, client_error_line, status
from .knobs import KNOBS
from .seed import datadir_for, ensure_datadir, run_datadir
from .verify import verify_database, verify_mariadb

HERE = Path(__file__).parent
DATABASE = Capability("database:mysql", "a MySQL database holding the workload's data (on a "
                      "unix socket), for its application's pages",
                      verify=verify_database)
# SHOW GLOBAL STATUS counters kept with a run (cumulative; the levels are left out). Each
# reading is one more connection and statement of its own.
STATUS_COUNTERS = (
    "Questions", "Com_select", "Connections", "Bytes_received", "Bytes_sent", "Rows_read",
    "Qcache_hits", "Qcache_inserts", "Qcache_not_cached", "Innodb_rows_read",
    "Innodb_buffer_pool_read_requests", "Innodb_buffer_pool_reads", "Key_read_requests",
    "Key_reads", "Handler_read_rnd_next", "Select_scan", "Sort_rows", "Created_tmp_tables",
    "Created_tmp_disk_tables", "Opened_tables", "Slow_queries")


class MariaDB(Component):
    name = "mariadb"
    package = "mariadb-server"
    binary = "/usr/sbin/mariadbd"
    version_args = ("--no-defaults", "--version")
    version_pattern = r"Ver (\d+\.\d+\.\d+)"
    knobs = KNOBS
    provides = (DATABASE,)

    def endpoint(self, ctx: RenderContext, knobs: dict[str, Any]) -> Endpoint:
        sock = lab.socket_path(ctx.run_dir, "mariadb.sock", self.name)
        return Endpoint(ctx.host, ctx.port, sock, scheme="mysql")

    def datadir(self, ctx: RenderContext, knobs: dict[str, Any]) -> Path:
        cache = ctx.cache_dir or ctx.run_dir / "cache"
        return datadir_for(cache, self.version(), ctx.database, knobs["engine"])

    def render(self, ctx: RenderContext, knobs: dict[str, Any]) -> dict[str, str]:
        ctx.run_dir.chmod(0o755)     # the PHP user reaches the socket through it
        (ctx.run_dir / "tmp").mkdir(exist_ok=True)
        seeded = self.datadir(ctx, knobs)
        ensure_datadir(seeded, ctx.database, knobs["engine"], ctx.run_dir, self.binary)
        datadir = run_datadir(seeded, ctx.run_dir, ctx.database)
        user = (userconf.read(self.knob("cnf_extra").key, knobs["cnf_extra"])
                if knobs["cnf_extra"] else None)
        files = {"my.cnf": render_template(
            HERE / "my.cnf.j2", ctx, knobs, datadir=datadir,
            socket=self.endpoint(ctx, knobs).unix,
            server_user="root" if os.getuid() == 0 else None,
            include=user, include_line=configtest.include_line(ctx.run_dir) if user else "")}
        if user:
            files[configtest.INCLUDED] = configtest.included(user)
        return files

    def versions(self, knobs: dict[str, Any]) -> dict[str, str]:
        """MariaDB's own, and the hash of the user's options (mariadb.cnf_extra), if any."""
        return {**super().versions(knobs),
                **userconf.versions(self.knob("cnf_extra").key, knobs.get("cnf_extra", ""))}

    def versions_depend_on(self, knobs: dict[str, Any]) -> tuple:
        return (knobs["cnf_extra"],) if knobs.get("cnf_extra") else ()

    def command(self, ctx: RenderContext, knobs: dict[str, Any]) -> list[str]:
        return [self.binary, f"--defaults-file={ctx.run_dir / 'my.cnf'}"]

    def ready(self, started: RunningComponent) -> bool:
        return socket_ready(started.endpoint)

    def verify(self, started: RunningComponent, front: RunningComponent) -> list:
        return verify_mariadb(started, front)

    def counters(self, started: RunningComponent) -> dict[str, float]:
        """SHOW GLOBAL STATUS: statements, rows read, query cache, buffer pool, temp
        tables…"""
        return status(started.endpoint.unix, STATUS_COUNTERS)

    def sql_client(self) -> SqlClient:
        return Client()

    def error_line(self, e: BaseException) -> str | None:
        return client_error_line(e)
