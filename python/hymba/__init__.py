"""hymba.cpp from Python: load, run, score, fine-tune and train hybrid
attention + Mamba language models, and run ablation suites, on the C++ engine.

A thin layer over the extension module ``hymba._hymba`` (pybind11): every
number comes from the same engine code as the ``hymba`` command, so results
equal the command's for the same inputs. See docs/python.md.

    import hymba
    lm = hymba.LanguageModel.load("runs/demo/runs/compare-hymba/best")
    print(lm.generate("Once upon a time", max_new_tokens=64, seed=1))
"""

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
