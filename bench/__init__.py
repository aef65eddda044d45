"""The benchmark scripts (docs/guide.md#benchmarks): each one is run as `.venv/bin/python bench/NAME.py`
and imports its siblings as `bench.NAME`.

Run that way, this folder is first on sys.path, so a module here shadows any installed package or
standard module of the same name for everything the script imports: `bench/kernels.py` once hid
Hugging Face's `kernels` package from transformers >= 5.25. No module here may be named like one;
tests/test_bench_imports.py checks the names against the installed distributions and the standard
library, and runs every script's `--help`.
"""
