"""examples/seed001.ipynb runs headless (nbclient) and produces its table,
plots and samples."""

import os
import pathlib
import time

import pytest

nbformat = pytest.importorskip("nbformat", reason="needs python3-nbformat (scripts/setup.sh --python)")
nbclient = pytest.importorskip("nbclient", reason="needs python3-nbclient and python3-ipykernel")

NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "examples" / "seed001.ipynb"


def test_seed001_notebook_runs(tmp_path, monkeypatch):
    # The kernel inherits the environment: PYTHONPATH (the built package) and these.
    monkeypatch.setenv("HYMBA_NOTEBOOK_OUT", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # The kernel runs in tmp_path: the package this test imports, by absolute path.
    import hymba
    here = str(pathlib.Path(hymba.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    start = time.monotonic()
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                            ).execute()
    seconds = time.monotonic() - start
    print(f"seed001.ipynb ran in {seconds:.1f} s")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if "data" in o and "text/html" in o["data"]]
    assert html and "Best PPL" in html[0] and "Hybrid-Official" in html[0]  # the DataFrame
    assert (tmp_path / "ablation_results.png").stat().st_size > 10000
    samples = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert samples.count("'The ") + samples.count("'Once upon a time") + samples.count("'A friend") == 3
