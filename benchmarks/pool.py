"""Worker processes for the serving benchmark: an engine on N processes of threads // N
threads each, one model each, that a run's length-sorted batches are dealt to in turn."""

from __future__ import annotations

import sys

import torch

from t2.serve.engine import length_batches


def _pool_worker(build, build_args: tuple, threads: int, jobs, done) -> None:  # noqa: ANN001
    """A Pool's process: work = build(*build_args), then work(*job) for each job until None."""
    torch.set_num_threads(threads)
    work = build(*build_args)
    while (job := jobs.get()) is not None:
        done.put(work(*job))


class Pool:
    """`workers` processes of threads // workers threads each, each holding its own engine
    (`build(*build_args)` there, a function of a job's arguments): map() gives worker k the
    k-th job and returns their results in order."""

    def __init__(self, build, build_args: tuple, workers: int, threads: int) -> None:  # noqa: ANN001
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # a fork would copy torch's threads
        self.jobs = [context.Queue() for _ in range(workers)]
        self.done = [context.Queue() for _ in range(workers)]
        self.processes = [
            context.Process(
                target=_pool_worker,
                daemon=True,
                args=(build, build_args, max(1, threads // workers), jobs, done),
            )
            for jobs, done in zip(self.jobs, self.done, strict=True)
        ]
        for process in self.processes:
            process.start()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def map(self, jobs: list[tuple]) -> list:
        for queue, job in zip(self.jobs, jobs, strict=True):
            queue.put(job)
        return [self._result(k) for k in range(len(self.done))]

    def _result(self, k: int):  # noqa: ANN202
        """Worker k's result; a worker that died (its traceback is above) stops the run."""
        import queue

        while True:
            try:
                return self.done[k].get(timeout=1.0)
            except queue.Empty:
                if not self.processes[k].is_alive():
                    code = self.processes[k].exitcode
                    self.close()
                    sys.exit(
                        f"error: worker {k} of a pool stopped (exit code {code}); its "
                        f"error is printed above"
                    )

    def deal(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        """The length-sorted batches dealt out in turn: each worker's indices, in sorted
        order, so that sorting and cutting them again there gives the same batches."""
        batches = list(length_batches(lengths, batch_size))
        n = len(self.jobs)
        return [[i for batch in batches[k::n] for i in batch] for k in range(n)]

    def close(self) -> None:
        for queue, process in zip(self.jobs, self.processes, strict=True):
            if process.is_alive():
                queue.put(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
