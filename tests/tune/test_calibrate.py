"""`prism calibrate` (`prism.tune.calibrate`): on this CPU the microbenchmark kernels run in
Triton's interpreter and their results are checked (the oracle: torch.equal of the copy with its
source, the touched value read back); their times are labelled `interpreted` and no device number
is derived from them. On a GPU (marked `gpu`) the figures are `measured` and compared with the
cost model's."""

from __future__ import annotations

import json

import pytest
import torch

from prism.cli import main
from prism.cost import get_device
from prism.tune import calibrate as cal


def test_on_a_cpu_the_kernels_are_checked_and_every_time_is_interpreted(tmp_path):
    doc = cal.calibrate("h200", quick=True)
    assert (doc["device"], doc["where"], doc["kind"]) == ("h200", "cpu", "interpreted")
    figures = doc["figures"]
    for name, model in (("launch_us", 4.0), ("mem_bw_gbps", 4800.0), ("l2_bw_gbps", 7000.0),
                        ("sync_us", 1.0)):
        assert figures[name]["kind"] == "interpreted" and figures[name]["model"] == model
        assert "measured_over_model" not in figures[name]      # nothing claimed of the GPU
    assert [r["blocks"] for r in figures["few_blocks"]] == [1, 2, 4]
    assert all(r["kind"] == "interpreted" for r in figures["few_blocks"])
    path = cal.write(doc, tmp_path)
    assert path.name == "calibration-h200-interpreted.json"
    assert json.loads(path.read_text())["figures"] == json.loads(json.dumps(figures))
    assert "interpreted" in cal.text(doc) and "measured" not in cal.text(doc).split(":")[0]


def test_a_copy_kernel_that_copies_wrong_is_refused(monkeypatch):
    """A real kernel that writes every other element: the check catches it."""
    broken = cal.KERNELS.replace("mask = offs < n", "mask = (offs < n) & (offs % 2 == 0)")
    assert broken != cal.KERNELS
    monkeypatch.setattr(cal, "KERNELS", broken)
    with pytest.raises(cal.CalibrationError, match="did not copy its source"):
        cal.calibrate("h100", quick=True)


def test_a_tail_that_leaves_its_counter_set_is_refused(monkeypatch):
    """`arrive` whose tail does not set the counter back to 0: the next run's count would be
    off, and the check says so."""
    broken = cal.KERNELS.replace("tl.store(counters + g, 0)", "pass")
    assert broken != cal.KERNELS
    monkeypatch.setattr(cal, "KERNELS", broken)
    with pytest.raises(cal.CalibrationError, match="did not sum its parts"):
        cal.calibrate("h100", quick=True)
    # summing what is not the group's parts is refused too
    broken = cal.KERNELS.replace("tl.store(sums + g, tl.sum(got, axis=0))",
                                 "tl.store(sums + g, tl.sum(got, axis=0) - 1.0)")
    assert broken != cal.KERNELS
    monkeypatch.setattr(cal, "KERNELS", broken)
    with pytest.raises(cal.CalibrationError, match="did not sum its parts"):
        cal.calibrate("h100", quick=True)


def test_prism_calibrate_writes_its_json(capsys, tmp_path):
    code = main(["calibrate", "--quick", "--out", str(tmp_path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["kind"] == "interpreted"
    assert json.loads((tmp_path / "calibration-h100-interpreted.json").read_text())["device"] \
        == "h100"


def test_an_unknown_device_is_refused_before_any_work(capsys):
    assert main(["calibrate", "--device", "h999", "--json"]) == 2
    assert "unknown device" in json.loads(capsys.readouterr().out)["error"]["message"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_figures_are_measured_beside_the_model():
    doc = cal.calibrate("h100")
    assert doc["kind"] == "measured"
    hbm = doc["figures"]["mem_bw_gbps"]
    assert 0.2 < hbm["measured_over_model"] < 1.5        # a copy reaches a fair share of HBM
    assert doc["figures"]["launch_us"]["value"] < 50
    assert get_device("h100").mem_bw_gbps == hbm["model"]
