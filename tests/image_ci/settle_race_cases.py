"""Test helper for test_ci_patches.py: e2b_settle.settle_abandoned
(os-image/e2b-ci/PATCHES 0008) against a scripted kernel behind a scripted
context, the way messaging.py drives it when a run's client goes away:

    /usr/bin/python3 settle_race_cases.py SERVER_DIR

SERVER_DIR is the patched template/server of upstream's tree. The server's
own dependencies (anyio, pydantic's models, httpx) are not on the build
machine's python: the three names e2b_settle imports from them stand in
here (anyio.CancelScope, api.models.output.OutputType,
e2b_startup.seconds_from_env); settle_abandoned's own logic is the
patch's. Prints one line: SETTLE-RACE <json>, each case the order in
which things happened, then whether a probe was left registered."""
import asyncio
import enum
import json
import sys
import types


def stand_ins():
    anyio = types.ModuleType("anyio")

    class CancelScope:
        def __init__(self, shield=False):
            self.shield = shield

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    anyio.CancelScope = CancelScope
    output = types.ModuleType("api.models.output")
    output.OutputType = enum.Enum("OutputType", {"END_OF_EXECUTION": "end_of_execution",
                                                 "UNEXPECTED_END_OF_EXECUTION": "unexpected_end_of_execution",
                                                 "STDOUT": "stdout"})
    api, models = types.ModuleType("api"), types.ModuleType("api.models")
    api.models, models.output = models, output
    startup = types.ModuleType("e2b_startup")
    startup.seconds_from_env = lambda name, default: default
    sys.modules.update({"anyio": anyio, "api": api, "api.models": models, "api.models.output": output,
                        "e2b_startup": startup})
    return output.OutputType


class Execution:
    """What e2b_settle uses of messaging.Execution."""

    def __init__(self, in_background=False):
        self.queue = asyncio.Queue()
        self.settled = asyncio.Event()
        self.in_background = in_background


class Context:
    """A context whose kernel follows a script. CASE:
    busy       the interrupt reaches the cell while it runs; the cell ends
               because of it (idle status, then its end) a little later;
    raced      the cell ends (idle status, and its end queued) while the
               interrupt request is on its way: the interrupt reaches an
               idle kernel after it, and stays pending there until the next
               request the kernel runs, which it interrupts;
    ended      the cell had ended before the client went away."""

    context_id = "kernel-1"

    def __init__(self, case, cell, log, output_type):
        self.case, self.cell, self.log, self.t = case, cell, log, output_type
        self._executions = {"cell": cell}
        self._ws = self
        self.pending_interrupt = False

    def cell_ends(self):
        self.cell.settled.set()
        self.cell.queue.put_nowait(types.SimpleNamespace(type=self.t.END_OF_EXECUTION))
        self.log.append("cell idle")

    async def interrupt(self):
        await asyncio.sleep(0.05)   # the request to Jupyter, on its way
        if self.case == "raced":
            self.cell_ends()
            self.log.append("interrupt reaches the idle kernel")
            self.pending_interrupt = True
        else:
            self.log.append("interrupt reaches the busy cell")
            asyncio.get_running_loop().call_later(0.1, self.cell_ends)

    def _get_execute_request(self, message_id, code, background):
        return json.dumps({"msg_id": message_id, "code": code, "silent": background})

    async def send(self, request):
        message_id = json.loads(request)["msg_id"]
        self.log.append("probe sent")
        asyncio.get_running_loop().call_later(0.2, self.answer, message_id)

    def answer(self, message_id):
        taken = " (the late interrupt landed on it)" if self.pending_interrupt else ""
        self.pending_interrupt = False
        self.log.append("probe answered" + taken)
        probe = self._executions.get(message_id)
        if probe is not None:
            probe.settled.set()


async def case(name, output_type, settle_abandoned):
    log = []
    cell = Execution()
    ctx = Context(name, cell, log, output_type)
    if name == "ended":
        ctx.cell_ends()
    await asyncio.wait_for(settle_abandoned(ctx, "cell", cell), timeout=10)
    log.append("lock released")
    # What the next request would meet: an interrupt still pending in the kernel.
    if ctx.pending_interrupt:
        log.append("an interrupt is still pending for the next request")
    await asyncio.sleep(0.3)   # late answers, if any, come in before the count
    leftover = sorted(k for k in ctx._executions if k != "cell")
    return {"order": log, "probes_left": len(leftover)}


async def main(server):
    output_type = stand_ins()
    sys.path.insert(0, server)
    from e2b_settle import settle_abandoned
    return {name: await case(name, output_type, settle_abandoned) for name in ("busy", "raced", "ended")}


if __name__ == "__main__":
    print("SETTLE-RACE " + json.dumps(asyncio.run(main(sys.argv[1]))), flush=True)
