"""The ``voxgate`` command line: ``serve`` and the feature subcommands."""
