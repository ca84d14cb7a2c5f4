"""`python -m contreact` runs the command line, as the `contreact` console script does."""

from contreact.cli import main

main()
