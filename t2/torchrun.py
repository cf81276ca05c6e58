"""torchrun, quiet where t2 already said why it stopped: `python -m t2.torchrun ARGS` takes
torchrun's own arguments. Given a stop signal, torchrun forwards it to the workers, waits
for them (--shutdown-timeout), then ends in a traceback of its own (SignalException); and
workers that exit 128 + a signal after saving make it print a ChildFailedError report. Here
both end with no more than torchrun's log lines, exiting 128 + the signal, since the
workers said why in one line (t2.train.preempt). Every other failure is torchrun's, as
torchrun reports it."""

from __future__ import annotations

import signal
import sys

# the statuses of a t2 process that said why it stopped: saved on SIGTERM or SIGUSR1
# (PreemptedError), or interrupted (Ctrl-C: `error: interrupted`); one that a signal
# killed has a negative status instead
SAID = {128 + signal.SIGTERM, 128 + signal.SIGUSR1, 128 + signal.SIGINT}


def main(argv: list[str] | None = None) -> None:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except SignalException as err:  # torchrun's own signal, forwarded to the workers
        sys.exit(128 + int(err.sigval))
    except ChildFailedError as err:  # the workers were signalled, torchrun was not
        codes = {failure.exitcode for failure in err.failures.values()}
        if not codes <= SAID:
            raise
        sys.exit(max(codes))


if __name__ == "__main__":
    main()
