"""Cross-check for `npm run bench -- optim`: runs torch.optim.AdamW and a float32 torch transcription
of torch_optimizer.Lamb (debias=True, as hivemind's ALBERT trainer) on the weights and gradients
the bench wrote, and writes the final weights back. Usage: python3 _torch_optim.py DIR"""
import json
import math
import sys

import numpy as np
import torch

NO_DECAY = ["bias", "LayerNorm.weight"]  # Hugging Face / hivemind


def lamb_step(params, state, lr, betas, eps, weight_decay, clamp_value):
    """torch_optimizer.Lamb.step for one param group, debias=True, adam=False."""
    beta1, beta2 = betas
    for p in params:
        st = state.setdefault(p, {"step": 0, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)})
        st["step"] += 1
        st["exp_avg"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
        st["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        step_size = lr * math.sqrt(1 - beta2 ** st["step"]) / (1 - beta1 ** st["step"])
        weight_norm = torch.norm(p.data).clamp(0, clamp_value)
        adam_step = st["exp_avg"] / st["exp_avg_sq"].sqrt().add(eps)
        if weight_decay != 0:
            adam_step.add_(p.data, alpha=weight_decay)
        adam_norm = torch.norm(adam_step)
        trust_ratio = 1 if weight_norm == 0 or adam_norm == 0 else weight_norm / adam_norm
        p.data.add_(adam_step, alpha=-step_size * float(trust_ratio))


def main(folder):
    spec = json.load(open(f"{folder}/spec.json"))
    w0 = np.fromfile(f"{folder}/w0.bin", dtype="<f4")
    grads = [np.fromfile(f"{folder}/g{s}.bin", dtype="<f4") for s in range(len(spec["lrs"]))]

    def tensors(flat):
        out, at = [], 0
        for t in spec["tensors"]:
            n = int(np.prod(t["shape"]))
            out.append(torch.tensor(flat[at : at + n].reshape(t["shape"])))
            at += n
        return out

    def groups(ps, wd):
        names = [t["name"] for t in spec["tensors"]]
        decay = [p for n, p in zip(names, ps) if not any(nd in n for nd in NO_DECAY)]
        exempt = [p for n, p in zip(names, ps) if any(nd in n for nd in NO_DECAY)]
        return [(decay, wd), (exempt, 0.0)]

    for kind in ("adamw", "lamb"):
        cfg = spec[kind]
        ps = [t.requires_grad_(False) for t in tensors(w0.copy())]
        if kind == "adamw":
            opt = torch.optim.AdamW([{"params": g, "weight_decay": wd} for g, wd in groups(ps, cfg["weightDecay"])], lr=0.0, betas=tuple(cfg["betas"]), eps=cfg["eps"])
        state = {}
        for step, lr in enumerate(spec["lrs"]):
            for p, g in zip(ps, tensors(grads[step])):
                p.grad = g
            if kind == "adamw":
                for group in opt.param_groups:
                    group["lr"] = lr
                opt.step()
            else:
                for group, wd in groups(ps, cfg["weightDecay"]):
                    lamb_step(group, state, lr, cfg["betas"], cfg["eps"], wd, cfg["clampValue"])
        np.concatenate([p.detach().numpy().ravel() for p in ps]).astype("<f4").tofile(f"{folder}/{kind}.bin")


if __name__ == "__main__":
    main(sys.argv[1])
