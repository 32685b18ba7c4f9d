"""``sweep --dry-run``: a sweep's runs priced from recorded runs' timings, nearest recorded runs first."""

import pytest

from setgrpo_bench.cli import main
from setgrpo_bench.harness.price import MeasuredRun, estimate, judge_factor, measured_runs, price
from setgrpo_bench.harness.rundir import write_json

CONFIG = {"steps": 10, "groups_per_step": 4, "group_size": 5}  # 200 rollouts


def _recorded(root, name, agent, noise, train, threads=1, *, eval_json=True):
    folder = root / name
    folder.mkdir(parents=True)
    write_json(folder / "config.json", {"config": {**CONFIG, "agent": agent, "noise": noise}})
    write_json(folder / "timings.json", {"train_seconds": train, "final_eval_seconds": 20.0, "threads": threads})
    if eval_json:
        write_json(folder / "eval.json", {})


def test_recorded_runs_are_read_at_any_depth_per_rollout_and_unfinished_ones_left_out(tmp_path):
    _recorded(tmp_path, "a/grpo/seed0", "grpo", "realistic", 180.0)
    _recorded(tmp_path, "b/c/setgrpo/seed0", "setgrpo", "learned", 80.0, threads=2)
    _recorded(tmp_path, "d/unfinished", "grpo", "realistic", 999.0, eval_json=False)
    runs = sorted(measured_runs([tmp_path]), key=lambda r: r.agent)
    assert runs == [MeasuredRun("grpo", "realistic", 1.0), MeasuredRun("setgrpo", "learned", 1.0)]


def test_a_planned_run_is_priced_by_its_nearest_recorded_runs():
    measured = [MeasuredRun("grpo", "realistic", 1.0), MeasuredRun("grpo", "realistic", 3.0),
                MeasuredRun("grpo", "learned", 10.0), MeasuredRun("setgrpo", "harsh", 7.0)]
    assert estimate("grpo", "realistic", 100, measured) == (200.0, "this agent under this judge (2 runs)")
    assert estimate("grpo", "harsh", 100, measured) == (300.0, "this agent, other judges (3 runs)")  # no agent ran both
    assert estimate("dapo", "harsh", 100, measured) == (700.0, "other agents, this judge (1 runs)")
    assert estimate("dapo", "clean", 100, measured) == (500.0, "every recorded run (4 runs)")
    seconds, source = estimate("dapo", "clean", 100, [])
    assert seconds != seconds and source == "no recorded run"
    # setgrpo under learned costs 4× its realistic runs: grpo's realistic median (2) × 4 prices grpo under learned,
    # were grpo's own learned runs not there; dapo, never recorded under learned, is priced by the other agents there
    scaled = measured[:2] + [MeasuredRun("setgrpo", "realistic", 2.0), MeasuredRun("setgrpo", "learned", 8.0)]
    assert estimate("grpo", "learned", 100, scaled) == (800.0, "this agent, other judges (2 runs) × 4.00, this judge's "
                                                               "cost factor (1 agents)")
    both = scaled + [MeasuredRun("dapo", "learned", 9.0), MeasuredRun("dapo", "realistic", 1.0)]
    assert judge_factor("learned", both) == (pytest.approx((4.0 + 9.0) / 2), 2)  # the median of the agents' ratios
    rows = price([("grpo", "realistic", 5, CONFIG)], measured)
    assert rows == [{"agent": "grpo", "noise": "realistic", "runs": 5, "cpu_seconds_per_run": 400.0,
                     "cpu_hours": pytest.approx(2000 / 3600), "source": "this agent under this judge (2 runs)"}]


def test_a_dry_run_prints_the_price_and_runs_nothing(tmp_path, capsys):
    _recorded(tmp_path / "timings", "grpo/seed0", "grpo", "realistic", 1780.0)  # 9 s per rollout
    code = main(["sweep", "--agents", "grpo", "--seeds", "3", "--steps", "10", "--groups-per-step", "4", "--group-size", "5",
                 "--out", str(tmp_path / "sweep"), "--timings", str(tmp_path / "timings"), "--dry-run", "--jobs", "2"])
    out = capsys.readouterr().out
    assert code == 0 and not (tmp_path / "sweep").exists()
    assert "30.0" in out and "1.50" in out and "3 runs left, 1.5 CPU-hours: about 0.8 hours at --jobs 2" in out


def test_a_dry_run_prices_only_the_runs_a_resumed_sweep_has_left(tmp_path, capsys):
    _recorded(tmp_path / "timings", "grpo/seed0", "grpo", "realistic", 1780.0)  # 9 s per rollout, 30 min per run
    _recorded(tmp_path / "sweep", "realistic/grpo/seed1", "grpo", "realistic", 1780.0)  # finished: skipped on resume
    _recorded(tmp_path / "sweep", "realistic/grpo/seed2", "grpo", "realistic", 1780.0, eval_json=False)  # resumed
    code = main(["sweep", "--agents", "grpo", "--seeds", "3", "--steps", "10", "--groups-per-step", "4", "--group-size", "5",
                 "--out", str(tmp_path / "sweep"), "--timings", str(tmp_path / "timings"), "--dry-run"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and f"2 runs left (1 of 3 finished in {tmp_path / 'sweep'}), 1.0 CPU-hours" in out


def test_a_board_sweep_leaves_out_the_cells_its_board_holds(tmp_path, capsys):
    """A cell published under the sweep's protocol is not run (or priced) again, even where the sweep's
    folder is gone; an entry of another protocol is no such cell."""
    from setgrpo_bench.agents.presets import board_presets
    from setgrpo_bench.agents.protocol import load_protocol

    protocol = load_protocol("board-v3")
    cells = protocol.cells(board_presets(protocol))
    (tmp_path / "board" / "results").mkdir(parents=True)
    for name, agent, protocol_id in [("a", "grpo", protocol.id), ("b", "dapo", "board-v2@1")]:
        write_json(tmp_path / "board" / "results" / f"{name}.json",
                   {"agent": agent, "suite": {"noise": "realistic"}, "protocol": {"id": protocol_id}})
    _recorded(tmp_path / "timings", "grpo/seed0", "grpo", "realistic", 1780.0)
    code = main(["sweep", "--protocol", "board-v3", "--agents", "board", "--board", str(tmp_path / "board"),
                 "--out", str(tmp_path / "sweep"), "--timings", str(tmp_path / "timings"), "--dry-run"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and f"1 of {len(cells)} cells of {protocol.id} are on" in out
    assert f"{sum(k for _, _, k in cells) - 5} runs left," in out
