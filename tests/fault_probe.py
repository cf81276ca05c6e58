"""Probe the faults a training run meets (docs/run-directory.md, "Faults a run meets"):

    python tests/fault_probe.py

runs the tests that exercise each fault as a user meets it (tiny quickstart trainings
killed, signalled (in the last step and the final evaluation too), run twice in one
folder, given a full disk at any write, a torn log, a NaN, a reused tokenizer, a damaged
checkpoint or data cache, a changed number of processes, a process that stops answering,
a node with its own disk killed, a worker that torchrun restarts, an interrupted
translate, a multi-process job's exit) and prints one PASS or FAIL line per fault (SKIP
where its test was skipped: the full-disk probes mount a tmpfs, which needs root); the
exit status is 1 if any failed.
The test suite runs the same tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FAULTS = {  # fault -> the test (file::function) that exercises it
    "SIGKILL at any moment, inside a checkpoint write too":
        "test_train_resume.py::test_a_run_killed_at_any_moment_resumes_to_the_uninterrupted_result",
    "SIGTERM / SIGUSR1: checkpoint, one line, requeue, exact resume":
        "test_train_resume.py::test_a_preempted_run_saves_its_step_and_resumes_to_the_uninterrupted_log",
    "a signal in the last step or the final evaluation":
        "test_train_resume.py::test_a_signal_in_the_last_step_or_the_final_evaluation_ends_the_run_in_one_line",
    "a signal in the step that spends the time budget":
        "test_train_resume.py::test_a_signal_in_the_step_that_spends_the_time_budget_is_honoured",
    "a node with its own disk killed, resumed on both nodes":
        "test_train_nodes.py::test_two_nodes_with_their_own_disks_resume_on_both_to_the_shared_run",
    "a worker killed under torchrun --max-restarts":
        "test_train_nodes.py::test_an_elastic_restart_resumes_by_itself_to_the_uninterrupted_log",
    "two runs in one folder":
        "test_train_resume.py::test_a_second_run_in_a_held_folder_is_refused_until_the_holder_ends",
    "a full disk while a checkpoint is written":
        "test_rundir.py::test_a_full_disk_while_saving_is_one_line_naming_the_intact_checkpoint",
    "a disk that fills as torch.save writes the end of training_state.pt":
        "test_full_disk.py::test_a_disk_filling_as_torch_save_writes_the_file_end_names_the_intact_checkpoint",
    "a training run whose disk fills: one line, then --resume":
        "test_full_disk.py::test_a_training_run_on_a_disk_that_fills_ends_in_one_line_and_resumes",
    "a full disk at every other write (log, tokenizer, results, export, translations, cache)":
        "test_full_disk.py::test_every_write_on_a_full_disk_is_one_line_and_leaves_nothing_half_written",
    "a damaged data cache (cleaned pairs, tokenizer, token ids)":
        "test_data_cache.py::test_a_damaged_cache_is_set_aside_and_rebuilt",
    "a process that stops answering (SIGSTOP), 2 processes":
        "test_train_lost_process.py::test_a_stopped_process_ends_the_other_after_the_timeout_in_one_line_and_resume_continues",
    "a metrics.jsonl line torn by a crash":
        "test_train_resume.py::test_a_log_line_torn_by_a_crash_is_dropped_on_resume_and_a_damaged_log_refused",
    "a NaN validation":
        "test_train_runs.py::test_a_nan_validation_is_never_the_best_and_the_stop_message_is_true",
    "a reused tokenizer":
        "test_train_runs.py::test_a_run_reusing_a_tokenizer_trains_and_keeps_its_own_copy",
    "a damaged checkpoint; resuming from a named one":
        "test_train_resume.py::test_resume_names_a_checkpoint_and_a_damaged_one_is_not_called_format_1",
    "2 processes resumed on 1, dropout on":
        "test_train_resume.py::test_two_processes_resumed_on_one_accumulating_two_match_two_throughout",
    "out of memory in a step":
        "test_train_plan.py::test_out_of_memory_in_a_step_is_one_line_naming_the_micro_batch",
    "out of memory: planned and free memory, the intact checkpoint":
        "test_train_plan.py::test_out_of_memory_names_the_planned_and_free_memory_and_the_intact_checkpoint",
    "a compiler that fails: eager in one warning line":
        "test_train_compiling.py::test_a_compiler_failure_falls_back_to_eager_in_one_warning_line",
    "an interrupted or failing translate --output":
        "test_commands_translate.py::test_output_appears_under_its_name_only_when_complete",
    "damaged, foreign or newer checkpoints":
        "test_rundir.py::test_a_file_changed_after_it_was_written_is_refused",
    "a finished multi-process job aborting as it exits":
        "test_cli.py::test_a_process_of_a_multi_process_job_exits_without_finalizing",
}  # fmt: skip


class Outcomes:
    """Each test's worst outcome over its parametrizations and phases."""

    def __init__(self) -> None:
        self.failed: dict[str, bool] = {}
        self.ran: dict[str, bool] = {}  # False: every parametrization was skipped

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = report.nodeid.split("[")[0].removeprefix("tests/")
        self.failed[test] = self.failed.get(test, False) or report.failed
        ran = report.when == "call" or (report.failed and report.when == "setup")
        self.ran[test] = self.ran.get(test, False) or ran


def main() -> int:
    outcomes = Outcomes()
    ids = [str(HERE / test) for test in FAULTS.values()]
    pytest.main(
        ["-q", "--no-header", "-p", "no:cacheprovider", "--tb=line", *ids], plugins=[outcomes]
    )
    failures = 0
    for fault, test in FAULTS.items():
        failed = outcomes.failed.get(test)
        verdict = "PASS" if failed is False else "FAIL"
        if failed is False and not outcomes.ran.get(test):  # e.g. no root for a tmpfs
            verdict = "SKIP"
        failures += verdict == "FAIL"
        print(f"{verdict}  {fault}" + ("" if failed is not None else "  (the test did not run)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
