"""`python -m dinoml ...` is `python -m dinoml.cli ...`."""
import sys

from .cli import main

sys.exit(main())
