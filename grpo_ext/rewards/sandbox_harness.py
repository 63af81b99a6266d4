"""The script ``sandbox.run`` starts: ``python -I sandbox_harness.py FD TOKEN`` in the run's folder.

It runs ``program.py`` and then ``tests.py`` in one namespace and, only if both ran to their end, writes TOKEN to
the pipe FD: a program that exits early (``sys.exit(0)``, ``os._exit(0)``) never reaches that write, so it does
not pass. Where ``sandbox`` made a PID namespace this process is outside it and forks once: the child is the
namespace's first process, and when it ends the kernel ends every process the program started.
Standard library only; nothing of grpo_ext is imported (the script runs with a clean environment).
"""

import os
import sys
import traceback


def main(fd: int, token: str) -> None:
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    with open("program.py", encoding="utf-8") as fh:
        program = fh.read()
    with open("tests.py", encoding="utf-8") as fh:
        tests = fh.read()
    try:
        exec(compile(program, "program.py", "exec"), namespace)
        exec(compile(tests, "tests.py", "exec"), namespace)
    except SystemExit as exc:  # the program ended itself before the tests had their say
        print(f"exited early (status {exc.code!r})", file=sys.stderr)
        os._exit(1)
    except BaseException:
        traceback.print_exc(limit=5)
        os._exit(1)
    sys.stdout.flush()
    os.write(fd, token.encode("ascii"))
    os._exit(0)


if __name__ == "__main__":
    fd, token = int(sys.argv[1]), sys.argv[2]
    sys.argv = ["program.py"]
    pid = os.fork()  # in a PID namespace the child is its first process; elsewhere a plain child
    if pid == 0:
        main(fd, token)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
