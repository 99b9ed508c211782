"""hymba.cpp from Python: load, run, score, fine-tune and train hybrid
attention + Mamba language models, and run ablation suites, on the C++ engine.

A thin layer over the extension module ``hymba._hymba`` (pybind11): every
number comes from the same engine code as the ``hymba`` command, so results
equal the command's for the same inputs. See docs/python.md.

    import hymba
    lm = hymba.LanguageModel.load("runs/demo/runs/compare-hymba/best")
    print(lm.generate("Once upon a time", max_new_tokens=64, seed=1))
"""


def _choose_openblas_kernels():
    """Do what the ``hymba`` command does at start-up (core/build_info.h):
    OpenBLAS runs generic SSE kernels on a CPU it does not know (0.3.21 on
    an AVX-512 Xeon of model 207), float32 products then run 3x slower and
    their last bits differ from the command's. OpenBLAS picks its kernels
    when it loads, so a child process loads the extension and applies the
    engine's rule (better_openblas_core), and OPENBLAS_CORETYPE is set before
    this process loads it. Import hymba before numpy for that: once numpy has
    loaded OpenBLAS its choice holds, and child `hymba` commands are given
    the same. A user's setting stands."""
    import os
    import subprocess
    import sys

    if "OPENBLAS_CORETYPE" in os.environ or _PROBE in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/maps") as f:
            loaded = next((line.split()[-1] for line in f if "openblas" in line and ".so" in line), None)
    except OSError:
        loaded = None
    if loaded is not None:
        # Already loaded (numpy imported first): the extension shares it and
        # its kernels are settled; `hymba` commands run from here use the
        # same ones, so their results stay equal to the library's.
        import ctypes

        f = getattr(ctypes.CDLL(loaded), "openblas_get_corename", None)
        if f is not None:
            f.restype = ctypes.c_char_p
            os.environ["OPENBLAS_CORETYPE"] = f().decode()
        return
    try:
        core = subprocess.run([sys.executable, "-c", "import hymba._hymba as m; print(m._better_openblas_core())"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, _PROBE: "1"}).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core


def _choose_omp_wait_policy():
    """What the ``hymba`` command does at start-up: passive OpenMP workers
    unless the user chose a policy. Spinning workers made a notebook train
    4-20x slower than the command on a busy 2-core machine. OpenMP reads the
    policy when it loads, so it only takes hold when hymba is imported
    before another OpenMP user (numpy's OpenBLAS, torch); otherwise say so."""
    import os
    import warnings

    if "OMP_WAIT_POLICY" in os.environ:
        return
    try:
        with open("/proc/self/maps") as f:
            loaded = any("libgomp" in line or "libomp" in line for line in f)
    except OSError:
        loaded = False
    if loaded:
        warnings.warn("hymba: OpenMP was loaded before hymba (numpy or torch imported first), so its workers spin "
                      "while waiting; import hymba first, or start Python with OMP_WAIT_POLICY=passive",
                      RuntimeWarning, stacklevel=3)
        return
    os.environ["OMP_WAIT_POLICY"] = "passive"


_PROBE = "HYMBA_OPENBLAS_PROBE"  # set in the child that asks, which must not ask again

_choose_omp_wait_policy()
_choose_openblas_kernels()

from ._hymba import HymbaError, __version__, build_info, num_threads, presets, set_threads
from .model import LanguageModel
from .training import train
from .suites import ablate, synth
from . import classify

__all__ = [
    "HymbaError",
    "LanguageModel",
    "__version__",
    "ablate",
    "build_info",
    "classify",
    "num_threads",
    "presets",
    "set_threads",
    "synth",
    "train",
]
