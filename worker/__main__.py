"""`python -m skiplock` is `skiplock worker`."""

import sys

from skiplock.tools.cli import main

if __name__ == "__main__":
    sys.exit(main(["worker", *sys.argv[1:]]))
