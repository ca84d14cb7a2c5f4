"""`python -m contreact` runs the command line."""

from contreact.cli import main

main()
