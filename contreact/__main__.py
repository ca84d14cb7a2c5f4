"""`python -m contreact` runs the command line (started warm when a daemon serves, `launch`)."""

from contreact.launch import main

main()
