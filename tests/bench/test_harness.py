"""The benchmark harness on a machine without a GPU: CPU check mode, records -> docs, CLI."""
import json

import pytest
import torch

from fastpath._core import backend
from fastpath.bench import harness, load_cases, report
from fastpath.bench.__main__ import cpu_check, main

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(),
                            reason="main() times on a GPU; this checks the no-GPU mode")


@NO_GPU
def test_cpu_check_mode_softmax_passes_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["softmax"]) == 0
    out = capsys.readouterr().out
    assert "no CUDA GPU found: timings need one; checking the reference/interpreter paths instead" in out
    if backend.INTERPRET:  # conftest sets TRITON_INTERPRET=1 without a GPU: the kernels ran
        assert "path checked: Triton interpreter" in out
    assert out.count("pass  softmax") == len(load_cases(["softmax"])) and "FAIL" not in out
    assert not (tmp_path / "bench").exists()  # no JSON in that mode


def test_cpu_check_reports_a_wrong_result(capsys):
    case = load_cases(["softmax"], quick=True)[0]
    case.ours = lambda x: torch.softmax(x, -1) * 1.01  # 1% off: over the fp32 bound
    assert cpu_check([case]) == 1
    assert "FAIL  softmax" in capsys.readouterr().out


def test_row_arithmetic():
    case = load_cases(["softmax"], quick=True)[0]  # [1,128256] fp32, target <= 5 us
    row = harness.make_row(case, "graph", "cold", 4.0, 20.0, True, "rel err 0", copy_gbps=4000.0)
    assert row["bytes"] == 2 * 128256 * 4
    assert row["ratio"] == pytest.approx(5.0)
    assert row["gbps"] == pytest.approx(2 * 128256 * 4 / 4e-6 / 1e9)
    assert row["pct_copy"] == pytest.approx(100 * row["gbps"] / 4000.0)
    assert row["target"] == "<= 5 us" and row["met"] is True
    assert harness.make_row(case, "eager", "hot", 6.0, 20.0, True, "", 4000.0)["met"] is False


def _record(run, ours_us, torch_us, **kw):
    base = {"gpu": "NVIDIA H200", "sms": 132, "torch": "2.11.0", "triton": "3.6.0", "python": "3.12.3",
            "date": run[:19] + "Z", "run": run, "commit": "abc1234",
            "command": "python -m fastpath.bench softmax",
            "ceilings": {"copy_gbps": 4321.0, "copy_bytes": 2**31, "matmul_bf16_tflops": 777.0,
                         "matmul_n": 8192, "l2_bytes": 60 * 2**20},
            "suite": "softmax", "case": "softmax", "shape": [1, 128256], "dtype": "float32", "mode": "eager",
            "l2": "cold", "ours_us": ours_us, "torch_us": torch_us, "ratio": torch_us / ours_us,
            "bytes": 1026048, "gbps": 1026048 / ours_us / 1e3, "pct_copy": 1026048 / ours_us / 1e3 / 43.21,
            "target": "<= 5 us", "met": ours_us <= 5, "ok": True, "check": "rel err 1e-07"}
    base.update(kw)
    return json.dumps(base)


def test_report_round_trip(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    lines = [_record("2026-01-01T10:00:00.000001Z", 9.87, 55.5),  # an older run: not shown
             _record("2026-01-02T10:00:00.000001Z", 3.21, 48.7),
             _record("2026-01-02T10:00:00.000001Z", 6.54, 61.2, mode="graph", l2="hot",
                     suite="sampling", case="greedy", ok=False, check="greedy != argmax")]
    (results / "2026-01-02-nvidia-h200.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "docs" / "perf.md"
    assert report.main(["--results", str(results), "--out", str(out)]) == 0
    md = out.read_text()
    assert "Generated file: do not edit by hand" in md.splitlines()[2]
    assert "## NVIDIA H200" in md and "### softmax" in md and "### sampling" in md
    row = next(line for line in md.splitlines() if "| 3.21 |" in line)
    for cell in ("softmax", "1x128256", "float32", "eager", "cold", "48.70", "15.17x", "1.03 MB",
                 "320", "7.4", "<= 5 us", "yes", "ok"):
        assert f"| {cell} |" in row, cell
    assert "| 6.54 | 61.20 | 9.36x |" in md and "FAIL: greedy != argmax" in md and "**no**" in md
    for text in ("4321 GB/s", "777 TFLOP/s", "60 MiB", "abc1234", "torch 2.11.0", "triton 3.6.0",
                 "python 3.12.3", "2026-01-02T10:00:00Z", "`python -m fastpath.bench softmax`"):
        assert text in md, text
    assert "9.87" not in md  # only the newest run
    assert report.render(report.load(results)) == md  # deterministic


def test_report_keeps_rows_of_older_runs_and_renders_vae(tmp_path):
    """A row the newest run did not measure keeps its newest record (a commit column says which
    run); VAE records get their own table."""
    lines = [_record("2026-01-01T10:00:00.000001Z", 9.87, 55.5, case="log_softmax", commit="old1111"),
             _record("2026-01-02T10:00:00.000001Z", 3.21, 48.7, commit="new2222"),
             json.dumps({"gpu": "NVIDIA H200", "suite": "vae", "case": "vae decode wan2.1", "shape": [16, 21, 60, 104],
                         "dtype": "bfloat16", "conv": "taps", "cudnn_benchmark": True, "stock_s": 1.8, "ours_s": 1.5,
                         "speedup": 1.2, "stock_peak_gib": 4.38, "ours_peak_gib": 2.95, "memory_ratio": 0.67,
                         "rel_err": 0.019, "psnr_db": 47.2, "stock_err_f32": 0.016, "ours_err_f32": 0.014,
                         "run": "2026-01-02T11:00:00Z", "date": "2026-01-02T11:00:00Z", "commit": "vae3333"})]
    md = report.render([json.loads(line) for line in lines])
    assert "| 9.87 |" in md and "| 3.21 |" in md and "| old1111 |" in md and "| new2222 |" in md
    vae = next(line for line in md.splitlines() if line.startswith("| wan2.1 |"))
    for cell in ("16x21x60x104", "conv=taps, cudnn_benchmark", "1.20x", "0.67x", "1.6e-02, 1.4e-02", "`vae3333`"):
        assert cell in vae, cell


def test_report_leaves_out_failed_rows_a_newer_run_dropped(tmp_path):
    """A failed row of a mode that a newer run of the same case no longer measured is left out;
    a failed row of the newest run, and an old passing row of a dropped mode, stay."""
    lines = [_record("2026-01-01T10:00:00.000001Z", 9.87, 55.5, mode="graph", ok=False, check="capture broke"),
             _record("2026-01-01T10:00:00.000001Z", 7.65, 55.5, mode="graph", case="log_softmax"),
             _record("2026-01-02T10:00:00.000001Z", 3.21, 48.7),
             _record("2026-01-02T10:00:00.000001Z", 4.32, 48.7, case="log_softmax", ok=False, check="wrong")]
    md = report.render([json.loads(line) for line in lines])
    assert "capture broke" not in md and "| 9.87 |" not in md and "| 3.21 |" in md
    assert "| 7.65 |" in md and "FAIL: wrong" in md


def test_report_without_records(tmp_path):
    assert report.main(["--results", str(tmp_path), "--out", str(tmp_path / "perf.md")]) == 1
    assert not (tmp_path / "perf.md").exists()


def test_unknown_suite_is_named_exit_2(capsys):
    assert main(["softmax", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown suite 'nosuch'" in err and "softmax, sampling" in err
    assert main(["--no-such-option"]) == 2


def test_list_and_quick(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "16384x131072" in out and "top_k=50 top_p=0.9 T=0.7" in out
    assert main(["--list", "--quick", "softmax"]) == 0
    quick = capsys.readouterr().out.strip().splitlines()
    assert 0 < len(quick) < len(load_cases(["softmax"])) and all(line.startswith("softmax") for line in quick)


def test_knobs_set_and_restore():
    """harness.knobs: the tuning scripts' way to try a variant; restored on exit and on error,
    and an empty variant (the defaults) changes nothing."""
    from fastpath.ops import softmax as sm
    before = (sm.CHUNK, sm.FUSED)
    with harness.knobs(sm, CHUNK=512, FUSED=False):
        assert (sm.CHUNK, sm.FUSED) == (512, False)
    assert (sm.CHUNK, sm.FUSED) == before
    with pytest.raises(RuntimeError), harness.knobs(sm, CHUNK=7):
        raise RuntimeError
    assert sm.CHUNK == before[0]
    with harness.knobs(sm):
        assert (sm.CHUNK, sm.FUSED) == before


def test_host_us_counts_wall_time_per_call():
    """harness.host_us: a call that sleeps 2 ms measures at least that, per call."""
    import time as _time
    calls = []
    us = harness.host_us(lambda: (calls.append(1), _time.sleep(0.002)), n=5, warmup=2)
    assert len(calls) == 7
    assert 2000 <= us < 200000


def test_kernel_times_counts_each_op_per_call():
    """CPU ops stand in for kernels: the op ``fn`` runs twice a call is reported at 2 launches
    a call, the one ``before`` runs at 1, each with a positive time."""
    import torch
    from fastpath.bench.harness import kernel_times
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    times = kernel_times(lambda: (a @ b, a @ b), reps=4, before=lambda: a.sum(), cuda=False)
    mm = next(v for k, v in times.items() if k == "aten::mm")
    total = next(v for k, v in times.items() if k == "aten::sum")
    assert mm[1] == 2 and total[1] == 1 and mm[0] > 0 and total[0] > 0


def test_set_knob_applies_and_names_bad_input(capsys):
    """--set: a knob set before the cases run (the CPU check path here), and each malformed
    setting refused with exit 2 and a message naming it."""
    from fastpath.ops import loss
    old = loss.BWD_REVERSE
    try:
        assert main(["training", "--only", "mse_loss none", "--set", "ops.loss.BWD_REVERSE=False"]) == 0
        assert loss.BWD_REVERSE is False and "set fastpath.ops.loss.BWD_REVERSE = False" in capsys.readouterr().out
    finally:
        loss.BWD_REVERSE = old
    for bad, says in (("ops.loss.BWD_REVERSE", "MODULE.KNOB=VALUE"),
                      ("ops.nosuch.X=1", "no module fastpath.ops.nosuch"), ("ops.loss.NOSUCH=1", "has no NOSUCH"),
                      ("ops.loss.BWD_REVERSE=abc", "Python literal"),
                      ("ops.loss.BWD_REVERSE:float32=1", "not a table"),
                      ("ops.linalg.triangular.DIAG_PLAN:=1", "MODULE.TABLE:KEY=VALUE")):
        assert main(["--set", bad, "--list"]) == 2
        assert says in capsys.readouterr().err


def test_set_plan_table_entry(monkeypatch, capsys):
    """--set MODULE.TABLE:KEY=VALUE: one entry of a plan table, KEY a torch dtype's name or a
    literal; the table's other entries unchanged."""
    import torch

    from fastpath.bench.__main__ import apply_knobs
    from fastpath.ops.linalg import triangular as T
    monkeypatch.setattr(T, "DIAG_PLAN", dict(T.DIAG_PLAN))
    f32 = T.DIAG_PLAN[torch.float32]
    apply_knobs(["ops.linalg.triangular.DIAG_PLAN:complex64=(2, 1, None, 8)", "ops.linalg.triangular.DIAG_PLAN:7=1"])
    assert T.DIAG_PLAN[torch.complex64] == (2, 1, None, 8) and T.DIAG_PLAN[7] == 1
    assert T.DIAG_PLAN[torch.float32] == f32
    assert "DIAG_PLAN[torch.complex64] = (2, 1, None, 8)" in capsys.readouterr().out
