"""Engine processes allocate NumPy's arrays without huge-page advice (core.engine.plain_pages): on a
machine whose THP defrag is `madvise` and whose memory is fragmented, each first touch of an advised
array compacts memory synchronously (the 0.5B shape's model load 13.9-15.7 s -> 3.2-4.3 s). Each case
runs a fresh interpreter and reads the array's mapping in /proc/self/smaps (`hg`: MADV_HUGEPAGE)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
{imports}
import numpy as np
array = np.empty(64 << 20, np.uint8)
array.fill(1)
address = array.__array_interface__["data"][0] + array.nbytes // 2  # NumPy advises from a page boundary on
inside = False
for line in open("/proc/self/smaps"):
    head = line.split()[0]
    if "-" in head and not head.endswith(":"):
        start, end = (int(v, 16) for v in head.split("-"))
        inside = start <= address < end
    elif inside and head == "VmFlags:":
        print("advised" if "hg" in line.split()[1:] else "plain")
        break
"""


def probe(imports: str, **env) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    result = subprocess.run([sys.executable, "-c", PROBE.format(imports=imports)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={**environment, **env})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def test_numpy_alone_advises_huge_pages_here():
    """What the engine switches off is there to switch off (else the cases below prove nothing)."""
    assert probe("") == "advised"


def test_an_engine_process_allocates_plain_pages():
    assert probe("import core.engine") == "plain"
    assert probe("from core.engine.checkpoint import load_hf_model") == "plain"


def test_numpy_s_own_switch_in_the_environment_is_obeyed():
    assert probe("import core.engine", NUMPY_MADVISE_HUGEPAGE="1") == "advised"
    assert probe("", NUMPY_MADVISE_HUGEPAGE="0") == "plain"
