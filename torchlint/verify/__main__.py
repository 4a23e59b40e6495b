"""`python -m torchlint.verify SCRIPT [options] [-- script args]`: `torchlint verify`."""

import sys

from torchlint.cli import app

if __name__ == "__main__":
    sys.exit(app(["verify", *sys.argv[1:]], prog_name="torchlint"))
