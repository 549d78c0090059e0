"""Subcommands of the ``ringlab`` CLI, one module each, each exposing ``main(argv) -> int``."""
