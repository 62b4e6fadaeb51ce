"""The failure-injection suite (``tests/test_failures.py``) on GPU workers: one worker on a GPU, and two workers
sharing one GPU. Besides runs, loans and kept blocks, a failed call must leave no CUDA IPC handle open and no byte
of the workers' memory pools held (run with -m gpu on a GPU host)."""

import gc
import time

import pytest

from gpipe.backend import gpu_problem

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

import faults  # noqa: E402
from faults import MARK, within  # noqa: E402
from test_failures import (AFTER, BY_NAME, CALL_SECONDS, Case, Context, _deepwalk,  # noqa: E402
                           assert_cost_only_its_call, expected_result, leave_clean)

ON_DEVICE = Case("compute_on_device", lambda ctx: _deepwalk(ctx).compute(device=True).get(),
                 {"loan": "gpipe.runtime.results._ipc:DeviceRows.write"})  # the workers write into this process's GPU
CASES = {case.name: case for case in (*(BY_NAME[n] for n in ("deepwalk", "neighbor", "sampler", "list_cliques",
                                                              "estimate", "dynamic_walk", "to_parquet")), ON_DEVICE)}
# (cluster fixture, its workers): one GPU worker gathers nothing (a run's rows are all where its blocks are made)
CLUSTERS = {"gpu_cluster": 1, "shared_gpu_cluster": 2}
AT_PHASES = [pytest.param(cluster, case.name, phase, id=f"{cluster}-{case.name}-{phase}")
             for cluster, workers in CLUSTERS.items() for case in CASES.values() for phase in case.phases
             if workers > 1 or phase != "gather"]
_CONTEXTS: dict = {}  # cluster fixture -> its Context (graphs and results before any failure)


@pytest.fixture
def ctx(request, tmp_path_factory, monkeypatch):
    from gpipe.runtime import _watch

    monkeypatch.setattr(_watch, "GONE_SECONDS", 0.2)  # as in test_failures: no worker leaves here
    client = request.getfixturevalue(request.param)
    if request.param not in _CONTEXTS:
        _CONTEXTS[request.param] = Context(client, tmp_path_factory.mktemp(request.param))
    leave_clean(_CONTEXTS[request.param])
    client.run(faults.count_handles)  # on workers a restart made too
    with client.as_current():
        yield _CONTEXTS[request.param]
    gc.collect()


def _pools(client) -> dict:
    return {worker: left["pool bytes"] for worker, left in client.run(faults.residue).items()}


def assert_on_the_gpus_too(ctx, case, expected: str, pools: dict) -> None:
    """:func:`assert_cost_only_its_call`, and no worker's pool holds more than it held before the failed call."""
    assert_cost_only_its_call(ctx, case, expected)
    gc.collect()
    assert faults.settled(ctx.client) == {}
    # no more than before: what an ended run's loop held goes as its thread lets go, and what a call before this
    # one left to go in the background may go meanwhile
    deadline = time.monotonic() + 5
    while any((held := _pools(ctx.client))[w] > pools[w] for w in pools) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(held[w] <= pools[w] for w in pools), \
        f"the failed {case.name} left bytes in the workers' memory pools: {held}, before it {pools}"


def _before(ctx, case: Case) -> tuple[str, dict]:
    """The call's result before any failure (its digest), and what the workers' pools hold once settled."""
    expected = expected_result(ctx, case)
    gc.collect()
    faults.settled(ctx.client)
    return expected, _pools(ctx.client)


@pytest.mark.parametrize("ctx, name, phase", AT_PHASES, indirect=["ctx"])
def test_a_fault_inside_a_gpu_worker_at_each_phase_leaves_no_handle_and_no_pool_byte(ctx, name, phase):
    case = CASES[name]
    expected, pools = _before(ctx, case)
    with faults.injected(ctx.client, case.phases[phase], "after" if phase in AFTER else "raise") as hits:
        with within(CALL_SECONDS, f"{name} failing at {phase}"), pytest.raises(Exception, match=MARK):
            case.call(ctx)
    assert sum(hits.values()), f"{name} never reached {case.phases[phase]}"
    assert_on_the_gpus_too(ctx, case, expected, pools)


@pytest.mark.parametrize("ctx, name, phase", AT_PHASES, indirect=["ctx"])
def test_ctrl_c_while_a_gpu_worker_is_at_each_phase_leaves_no_handle_and_no_pool_byte(ctx, name, phase):
    case = CASES[name]
    expected, pools = _before(ctx, case)
    with within(CALL_SECONDS, f"{name} interrupted at {phase}"):
        with faults.interrupting(ctx.client, case.phases[phase]) as interrupt:
            with pytest.raises(KeyboardInterrupt):
                interrupt.call(lambda: case.call(ctx))
    assert interrupt.sent, f"{name} never reached {case.phases[phase]}"
    assert_on_the_gpus_too(ctx, case, expected, pools)
