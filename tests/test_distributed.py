"""Data-parallel training of a fastpad model: 2 processes, gloo, DistributedDataParallel.

Each rank trains on half of a fixed global batch with a mean loss, so DDP's averaged gradient is the gradient of
the full batch's mean loss: the gradients after every step and the parameters after the last one must equal a
single-process run on the full batch (float64, to 1e-12 relative). Rendezvous through a file in tmp_path (no
TCP port); the children run under a deadline, and a child's exception fails the test with its traceback.
"""

import datetime
import os
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

import fastpad
from reference import relative_error

WORLD_SIZE = 2
GLOBAL_BATCH = 6
# One spatial size per step: the 'same' pads are resolved per call, odd and even sizes alike.
STEP_SIZES = [(9, 10), (12, 7), (11, 11)]
LR = 0.05
DEADLINE_S = 120  # for the whole 2-process run; a healthy one takes a few seconds after its imports
COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=60)

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch.distributed with the gloo backend is not available")


def make_model():
    return torch.nn.Sequential(
        fastpad.nn.Conv2d(3, 6, 3, stride=2),                          # strided TF 'same'
        torch.nn.ReLU(),
        fastpad.nn.Conv2d(6, 6, 3, padding_mode="reflect"),             # reflect
        fastpad.nn.Conv2d(6, 6, (2, 3), padding=((1, 0), (0, 2))),     # asymmetric pads
        fastpad.nn.ConvTranspose2d(6, 3, 4, stride=2),                  # transposed 'same': out = in * 2
    ).double()


def make_data():
    """Per step: the global batch and its target (the model's output is 2*ceil(i/2) per dim)."""
    data = []
    for h, w in STEP_SIZES:
        x = torch.randn(GLOBAL_BATCH, 3, h, w, dtype=torch.float64)
        target = torch.randn(GLOBAL_BATCH, 3, 2 * -(-h // 2), 2 * -(-w // 2), dtype=torch.float64)
        data.append((x, target))
    return data


def train(model, data, shard=slice(None)):
    """SGD on the mean loss of data[step][shard]; returns the gradients of every step and the final parameters."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    grads = []
    for x, target in data:
        optimizer.zero_grad(set_to_none=True)
        F.mse_loss(model(x[shard]), target[shard]).backward()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        optimizer.step()
    return grads, [p.detach().clone() for p in model.parameters()]


def _worker(rank, workdir):
    """One rank: DDP over the shared initial state, its half of each global batch; saves what it saw."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{os.path.join(workdir, 'rendezvous')}", rank=rank,
                            world_size=WORLD_SIZE, timeout=COLLECTIVE_TIMEOUT)
    try:
        setup = torch.load(os.path.join(workdir, "setup.pt"))
        model = make_model()
        model.load_state_dict(setup["state"])
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        shard_size = GLOBAL_BATCH // WORLD_SIZE
        grads, params = train(ddp, setup["data"], slice(rank * shard_size, (rank + 1) * shard_size))
        torch.save({"grads": grads, "params": params}, os.path.join(workdir, f"rank{rank}.pt"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ranks(workdir):
    """Spawns the ranks and waits for them under DEADLINE_S; a child's exception is raised here, with its traceback."""
    context = mp.start_processes(_worker, args=(str(workdir),), nprocs=WORLD_SIZE, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"the {WORLD_SIZE} ranks did not finish within {DEADLINE_S} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join()


def test_ddp_matches_single_process(tmp_path):
    assert GLOBAL_BATCH % WORLD_SIZE == 0
    model = make_model()
    data = make_data()
    torch.save({"state": model.state_dict(), "data": data}, tmp_path / "setup.pt")
    expected_grads, expected_params = train(model, data)

    run_ranks(tmp_path)

    names = [name for name, _ in model.named_parameters()]
    for rank in range(WORLD_SIZE):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        for step, (grads, expected) in enumerate(zip(result["grads"], expected_grads)):
            for name, g, e in zip(names, grads, expected):
                error = relative_error(g, e)
                assert error <= 1e-12, f"rank {rank}, step {step}: grad of {name} off by {error:.3g} (relative)"
        for name, p, e in zip(names, result["params"], expected_params):
            error = relative_error(p, e)
            assert error <= 1e-12, f"rank {rank}: {name} after {len(data)} steps off by {error:.3g} (relative)"
