"""The `searchgrpo` commands other than `train` and `tui`, a module per group of them.

Each command is a plain function whose parameters are its options; `searchgrpo.cli` registers them
on the Typer app, in the order `--help` lists them. `options` holds what they share: the
`--config` and `--set` options, loading the config, and ending after Ctrl-C. As in `cli.py`, heavy
imports (torch, transformers) happen inside the command bodies, so `searchgrpo --help` stays fast.
"""
