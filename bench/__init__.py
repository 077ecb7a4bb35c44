"""The amux-memory bench suite: search against ripgrep, Hub latency/throughput, growth, footprint.

Run ``python -m bench`` (full run, results in ``bench/results/``) or
``python -m bench --quick`` (a smoke run of a few seconds on small synthetic
scopes).  See ``bench/README.md``.
"""
