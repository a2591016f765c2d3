"""``python -m crowdagg``."""

import sys

from ._entry import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
