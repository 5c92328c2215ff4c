import signal
import sys

from prism.cli import main

if __name__ == "__main__":      # a spawned worker process imports this module as __mp_main__
    code = main()
    # The run is over and its results are written: a Ctrl-C during the interpreter's teardown
    # (torch, triton and z3 clean up for a while) must not turn its exit code into a death by
    # SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)
