"""Test helper for test_ci_server.py: e2b_settle.finish_uncancelled
(os-image/e2b-ci/PATCHES 0008), run with the e2b-ci tree's own python and
anyio. The work it is given must run to its end although the task awaiting
it is cancelled, by an anyio cancel scope (as Starlette cancels a streaming
response when its client goes away) and by Task.cancel(), given twice; the
cancellation still reaches the caller afterwards. Prints one line:
SETTLE-CASES <json>, each case the order in which things happened."""
import asyncio
import json
import sys

import anyio

sys.path.insert(0, "/usr/lib/e2b-code-interpreter/server")
from e2b_settle import finish_uncancelled  # noqa: E402


async def work(log):
    await asyncio.sleep(0.3)
    log.append("work done")


async def caller(log):
    """What execute() does when its client goes away."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await finish_uncancelled(work(log))
        log.append("caller re-raises")
        raise


async def by_cancel_scope():
    log = []
    async with anyio.create_task_group() as group:
        group.start_soon(caller, log)
        await asyncio.sleep(0.1)
        group.cancel_scope.cancel()
    log.append("group ended")
    return log


async def by_task_cancel():
    log = []
    task = asyncio.create_task(caller(log))
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.sleep(0.1)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        log.append("caller cancelled")
    return log


async def main():
    return {"cancel_scope": await by_cancel_scope(), "task_cancel": await by_task_cancel()}


if __name__ == "__main__":
    print("SETTLE-CASES " + json.dumps(asyncio.run(main())), flush=True)
