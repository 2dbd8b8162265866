"""PyTorch peer for bench/gpu.ts: the same ALBERT pretraining step (bench/engine_torch.py's independent
model: forward, MLM + SOP loss, backward; gradient clipping at 1.0; the LAMB step of bench/_torch_optim.py;
fp16 = autocast + GradScaler) on the same CUDA GPU, at the largest micro-batch that runs, so the GPU bench
compares Cohort's CUDA step with PyTorch's on one machine rather than only with published figures.

Usage: gpu_torch.py '<json>' with json = {"config": {AlbertConfig fields}, "seqLens": [..], "precisions": [..],
"maxBatch": B, "steps": N, "device": "cuda"}
("device": "cpu" only checks the script where there is no GPU: fp32 only). Prints one JSON line per (seq, precision): {"seq", "precision", "batch",
"seq_per_s", "peak_gib"} (batch 0 and seq_per_s null when not even 1 fits), then {"torch", "gpu"}.
Without CUDA it prints {"error": ...} and exits 0.
"""
import contextlib
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _torch_optim import NO_DECAY, lamb_step  # noqa: E402
from engine_torch import Albert  # noqa: E402

LR, BETAS, EPS, WEIGHT_DECAY, CLAMP = 1e-4, (0.9, 0.999), 1e-6, 0.01, 10000.0


def step_fn(c, batch, seq, precision, dev):
    """A closure running one full training step, and the model (for cleanup)."""
    model = Albert(c).to(dev)
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(5, c["vocabSize"], (batch, seq), generator=g)
    labels = torch.where(torch.rand(batch, seq, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    types = (torch.arange(seq) >= seq // 2).long().expand(batch, seq).contiguous()
    mask = torch.ones(batch, seq, dtype=torch.long)
    sop = torch.randint(0, 2, (batch,), generator=g)
    inputs = [t.to(dev) for t in (ids, types, mask, labels, sop)]
    named = model.hf_names()
    decay = [p for n, p in named.items() if not any(nd in n for nd in NO_DECAY)]
    exempt = [p for n, p in named.items() if any(nd in n for nd in NO_DECAY)]
    state = {}
    # torch.amp.GradScaler from torch 2.3; Debian's 1.13 (the CPU check here) has only torch.cuda.amp's
    scaler = torch.amp.GradScaler(dev.type, enabled=precision == "fp16") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler(enabled=precision == "fp16")

    def step():
        model.zero_grad(set_to_none=False)
        with torch.autocast(dev.type, dtype=torch.float16) if precision == "fp16" else contextlib.nullcontext():
            loss = model(*inputs)[0]
        scaler.scale(loss).backward()
        scaler.unscale_(_Group(decay + exempt))
        # as Cohort's step: a non-finite gradient norm skips the update and the scaler backs off
        if torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)):
            with torch.no_grad():
                lamb_step(decay, state, LR, BETAS, EPS, WEIGHT_DECAY, CLAMP)
                lamb_step(exempt, state, LR, BETAS, EPS, 0.0, CLAMP)
        scaler.update()
        if dev.type == "cuda":
            torch.cuda.synchronize()

    return step, model


class _Group:
    """The optimizer-shaped object GradScaler.unscale_ wants (LAMB here is a function, not a torch.optim.Optimizer)."""

    def __init__(self, params):
        self.param_groups = [{"params": params}]
        self.state = {}


def time_steps(c, batch, seq, precision, steps, dev):
    """Median seconds per step after one warm-up and peak GiB allocated, or None when it runs out of memory."""
    model = None
    cuda = dev.type == "cuda"
    try:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        step, model = step_fn(c, batch, seq, precision, dev)
        step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return statistics.median(times), (torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0)
    except torch.cuda.OutOfMemoryError:
        return None
    finally:
        del model
        if cuda:
            torch.cuda.empty_cache()


def largest(c, seq, precision, max_batch, steps, dev):
    """Doubling from 1 up to max_batch, then the largest that ran timed with the full step count."""
    best, b = 0, 1
    while b <= max_batch:
        if time_steps(c, b, seq, precision, 1, dev) is None:
            break
        best, b = b, b * 2
    if best == 0:
        return {"seq": seq, "precision": precision, "batch": 0, "seq_per_s": None, "peak_gib": None}
    seconds, peak = time_steps(c, best, seq, precision, steps, dev)
    return {"seq": seq, "precision": precision, "batch": best, "seq_per_s": round(best / seconds, 2), "peak_gib": round(peak, 2)}


def main():
    args = json.loads(sys.argv[1])
    dev = torch.device(args.get("device", "cuda"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": f"torch {torch.__version__} sees no CUDA device"}), flush=True)
        return
    torch.manual_seed(0)
    for seq in args["seqLens"]:
        for precision in args["precisions"]:
            print(json.dumps(largest(args["config"], seq, precision, args["maxBatch"], args["steps"], dev)), flush=True)
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None}), flush=True)


if __name__ == "__main__":
    main()
