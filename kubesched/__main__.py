"""``python -m kubesched``: the same as the ``kubesched`` command."""

import sys

from kubesched.cli.main import main

sys.exit(main())
