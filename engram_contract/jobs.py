"""The command line a maintenance Job runs, shared by the operator (which builds CronJobs) and
the ``engram`` CLI (which parses it).

The image's entrypoint is ``engram``; a CronJob pod runs ``engram`` with :func:`job_args`. The
Job's data directory and backup directory are fixed paths inside the pod so the operator can
mount volumes there. Backup retention travels as the service's own setting
(``ENGRAM_MAINTENANCE__BACKUP__KEEP``), not as a flag.
"""

from __future__ import annotations

from typing import Final

from engram_contract.report import Task

ENTRYPOINT: Final = "engram"
DATA_DIR: Final = "/var/lib/engram"
# Where backup Jobs write (their own volume, apart from the data dir), given to the pod as
# BACKUP_DIR_ENV: the service's default is outside the data dir, beside it.
BACKUP_DIR: Final = "/var/lib/engram/backups"
BACKUP_DIR_ENV: Final = "ENGRAM_MAINTENANCE__BACKUP__DIR"
SUMMARY_FLAG: Final = "--summary-line"
DRY_RUN_FLAG: Final = "--dry-run"
# How many backups `engram backup` keeps, locally and as server snapshots.
BACKUP_KEEP_ENV: Final = "ENGRAM_MAINTENANCE__BACKUP__KEEP"


def job_args(task: Task, *, dry_run: bool = False) -> list[str]:
    """Arguments after ``engram`` for one maintenance run that ends with a summary line."""
    if task is Task.backup:
        if dry_run:
            raise ValueError("backup has no dry run")
        return ["backup", SUMMARY_FLAG]
    args = ["maintenance", task.value, SUMMARY_FLAG]
    if dry_run:
        args.append(DRY_RUN_FLAG)
    return args
