"""The MindSpore engine: layers, the model built from a family spec, mixture of experts, LoRA, the
CPU's fused kernels (kernels/: their C++ sources), the device paths, the compiled train step,
preference objectives, checkpoints, generation and export. Imports core.spec, core.data, core.run,
core.weights and core.eval; the console never imports it.

Importing it turns off NumPy's huge-page advice for the process (`plain_pages`): every engine process
(a training worker, an export, an evaluation, Serve) allocates its model's arrays after this import.
"""
from __future__ import annotations

import importlib
import os

HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"  # NumPy's own switch, read once when NumPy is imported


def plain_pages() -> bool:
    """Large NumPy arrays allocated without madvise(MADV_HUGEPAGE) from now on in this process, unless
    the environment sets NumPy's switch (NUMPY_MADVISE_HUGEPAGE: then NumPy does what it says). Returns
    whether the advice is now off.

    NumPy advises transparent huge pages for every array of 4 MiB or more. Where the kernel's THP
    setting is `madvise` with `defrag` `madvise` (Debian's and Ubuntu's default), each first touch of
    such an array then compacts memory for a huge page synchronously; on a long-running machine whose
    memory is fragmented that fails, slowly (measured on an Intel Xeon with 2 CPUs, AnonHugePages 0,
    2026-12-05): a 2 GB `np.empty(...).fill(0)` 5.0-6.8 s against 0.7 s; loading the Qwen2.5-0.5B
    shape's float32 parameters (`load_hf_model`, interleaved runs, files in the page cache) 8.3-8.5 s
    against 2.8-2.9 s, and bench/train_step.py's "model load" 13.9-15.7 s against 3.2-4.3 s. Where
    compaction succeeds the huge pages would have been quicker to touch, but only the arrays' first
    touch is at stake: the compiled step computes in MindSpore's own memory, not in these arrays."""
    if os.environ.get(HUGEPAGE_ENV) is not None:
        return os.environ[HUGEPAGE_ENV] == "0"
    switch = getattr(importlib.import_module("numpy._core.multiarray"), "_set_madvise_hugepage", None)
    if switch is None:  # a NumPy without the advice
        return True
    switch(False)
    return True


plain_pages()
