"""torchrun, quiet where t2 already said why it stopped: `python -m t2.torchrun ARGS` takes
torchrun's own arguments. Given a stop signal, torchrun forwards it to the workers, waits
for them (--shutdown-timeout), then ends in a traceback of its own (SignalException); and
workers that exit 128 + a signal after saving make it print a ChildFailedError report. Here
both end with no more than torchrun's log lines, exiting 128 + the signal, since the
workers said why in one line (t2.train.preempt). Every other failure is torchrun's, as
torchrun reports it. torchrun handles SIGTERM, SIGINT, SIGHUP and SIGQUIT only: SIGUSR1
(SLURM's `--signal=USR1@SECONDS`) would kill it and leave its workers, in sessions of their
own, training on; here it handles SIGUSR1 too, unless given its own --signals-to-handle."""

from __future__ import annotations

import signal
import sys

# the statuses of a t2 process that said why it stopped: saved on SIGTERM or SIGUSR1
# (PreemptedError), or interrupted (Ctrl-C: `error: interrupted`); one that a signal
# killed has a negative status instead
SAID = {128 + signal.SIGTERM, 128 + signal.SIGUSR1, 128 + signal.SIGINT}
HANDLED = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"  # torchrun's default and SIGUSR1


def with_sigusr1(argv: list[str]) -> list[str]:
    """torchrun's arguments, with SIGUSR1 among the signals it handles and forwards unless
    they name their own; unchanged, with one line saying so, where torchrun has no such
    option."""
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    if not any(action.dest == "signals_to_handle" for action in parser._actions):
        print(
            "t2.torchrun: this torch's torchrun has no --signals-to-handle, so SIGUSR1 ends "
            "it and not its workers: have the scheduler send SIGTERM, or upgrade torch",
            file=sys.stderr,
        )
        return argv
    parser.set_defaults(signals_to_handle=None)
    if parser.parse_args(argv).signals_to_handle is not None:  # the user's own
        return argv
    return ["--signals-to-handle", HANDLED, *argv]


def main(argv: list[str] | None = None) -> None:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        torchrun(with_sigusr1(sys.argv[1:] if argv is None else argv))
    except SignalException as err:  # torchrun's own signal, forwarded to the workers
        sys.exit(128 + int(err.sigval))
    except ChildFailedError as err:  # the workers were signalled, torchrun was not
        codes = {failure.exitcode for failure in err.failures.values()}
        if not codes <= SAID:
            raise
        sys.exit(max(codes))


if __name__ == "__main__":
    main()
