"""Async Python clients for the voxgate sockets (used by the CLI, tests and benchmarks)."""
