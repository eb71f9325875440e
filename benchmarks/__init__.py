"""gpuwise's benchmarks: accuracy and speed figures, each script run as ``python -m benchmarks.<name>``.

A package so that every script imports the shared parts (``benchmarks.harness``, ``benchmarks.time_cases``)
by name, with gpuwise imported as installed: no script edits ``sys.path``.
"""
