"""`python -m searchgrpo` runs the CLI (also what `accelerate launch -m searchgrpo` uses)."""

from searchgrpo.cli import main

main()
