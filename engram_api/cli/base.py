"""What a command module gives the CLI: ``register(subparsers)`` setting ``func`` on each
sub-parser to a :data:`Command`, which gets the built settings and the parsed arguments and
returns the exit code. Errors are raised, never printed: ``main`` turns them into one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from engram_api.settings import EngramSettings

Command = Callable[[EngramSettings, argparse.Namespace], int]
