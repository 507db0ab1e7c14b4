"""Self-maintenance: dedup, re-extraction, conflicts, consolidation, decay, backups, reports.

Kept import-free: :mod:`engram_api.settings` imports :mod:`engram_api.maintenance.config`.
"""
