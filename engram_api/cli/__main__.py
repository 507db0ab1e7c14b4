import sys

from engram_api.cli import main

sys.exit(main())
