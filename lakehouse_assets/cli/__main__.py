"""``python -m lakehouse_assets.cli``: the ``lakehouse`` command without the console script."""

import sys

from lakehouse_assets.cli import main

sys.exit(main())
