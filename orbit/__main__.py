"""`python -m orbit` and the `orbit` console script: the only place that exits."""

import sys


def entry() -> None:
    from orbit.cli import main

    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    entry()
