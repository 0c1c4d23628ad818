"""``python -m kubesched.cli.up_scheduler``: the scheduler process of ``kubesched up`` (not a
command of its own: ``up`` starts it and talks to it over its standard input and output, see
``kubesched.simulator.scheduler_process``). It lives here because it resolves ``--plugin`` as
every command does."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import orjson

from kubesched.cli import logs
from kubesched.cli.common import registry_from
from kubesched.simulator.scheduler_process import LINE_LIMIT, SchedulerSpec, serve
from kubesched.utils.heap import settle_long_lived_heap


def main() -> int:
    settle_long_lived_heap()
    # Ctrl-C reaches the whole process group; ``up`` stops this process in order (end of input).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not garble the answers
    logs.configure(0, "text")

    def answer(message: dict) -> None:
        answers.write(orjson.dumps(message) + b"\n")
        answers.flush()

    async def run() -> int:
        loop = asyncio.get_running_loop()
        requests = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(requests), sys.stdin)
        line = await requests.readline()
        if not line:  # ``up`` went away before it said what to run
            return 0
        spec = SchedulerSpec.from_line(line)
        return await serve(spec, registry_from(spec.plugins), requests, answer)

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
