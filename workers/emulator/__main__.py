"""`python -m workers.emulator [options]`: the same as `comfy-gateway emulate [options]`."""

import sys

from workers.emulator.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
