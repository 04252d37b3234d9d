"""``python -m voicegate.cli``: the ``voicegate`` command line."""

import sys

from voicegate.cli import main

sys.exit(main())
