"""PyTorch peer for bench/engine.ts: the same ALBERT-for-pretraining step (forward, MLM + SOP loss,
backward; no optimizer) written in plain torch, timed on the CPU.

Usage: engine_torch.py '<json>' where json = {"config": {AlbertConfig fields}, "batch": B, "seq": S,
"threads": t}. Then each "step" line on stdin runs one step and prints {"ms"}; any other line (or EOF)
prints {"loss": first-step loss, "peak_rss_mb", "torch": version} and exits.
"""
import json
import math
import resource
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Albert(nn.Module):
    def __init__(self, c):
        super().__init__()
        V, E, H, I = c["vocabSize"], c["embeddingSize"], c["hiddenSize"], c["intermediateSize"]
        self.c = c
        self.word = nn.Embedding(V, E, padding_idx=c["padTokenId"])
        self.pos = nn.Embedding(c["maxPositionEmbeddings"], E)
        self.tok = nn.Embedding(c["typeVocabSize"], E)
        self.emb_ln = nn.LayerNorm(E, eps=c["layerNormEps"])
        self.map_in = nn.Linear(E, H)
        self.q, self.k, self.v, self.dense = (nn.Linear(H, H) for _ in range(4))
        self.attn_ln = nn.LayerNorm(H, eps=c["layerNormEps"])
        self.ffn, self.ffn_out = nn.Linear(H, I), nn.Linear(I, H)
        self.full_ln = nn.LayerNorm(H, eps=c["layerNormEps"])
        self.pooler, self.sop = nn.Linear(H, H), nn.Linear(H, 2)
        self.pred_dense, self.pred_ln = nn.Linear(H, E), nn.LayerNorm(E, eps=c["layerNormEps"])
        self.pred_bias = nn.Parameter(torch.zeros(V))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0.0, 0.02)

    def forward(self, ids, types, mask, labels, sop_labels):
        B, S = ids.shape
        H, nh = self.c["hiddenSize"], self.c["numAttentionHeads"]
        d = H // nh
        pos = torch.arange(S).unsqueeze(0)
        h = self.map_in(self.emb_ln(self.word(ids) + self.pos(pos) + self.tok(types)))
        ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        heads = lambda x: x.view(B, S, nh, d).transpose(1, 2)
        for _ in range(self.c["numHiddenLayers"]):
            q, k, v = heads(self.q(h)), heads(self.k(h)), heads(self.v(h))
            probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + ext, dim=-1)
            ctx = (probs @ v).transpose(1, 2).reshape(B, S, H)
            a = self.attn_ln(h + self.dense(ctx))
            h = self.full_ln(self.ffn_out(gelu_new(self.ffn(a))) + a)
        t = self.pred_ln(gelu_new(self.pred_dense(h)))
        logits = F.linear(t, self.word.weight, self.pred_bias)
        mlm = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        sop = F.cross_entropy(self.sop(torch.tanh(self.pooler(h[:, 0]))), sop_labels)
        return mlm + sop


def main():
    args = json.loads(sys.argv[1])
    torch.set_num_threads(args["threads"])
    torch.manual_seed(0)
    c, B, S = args["config"], args["batch"], args["seq"]
    model = Albert(c)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c["vocabSize"], (B, S), generator=g)
    labels = torch.where(torch.rand(B, S, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    types = (torch.arange(S) >= S // 2).long().expand(B, S)
    mask = torch.ones(B, S, dtype=torch.long)
    sop_labels = torch.randint(0, 2, (B,), generator=g)
    # serve: one line per command on stdin ("step" → {"ms"}, "quit" → summary), so the bench can
    # interleave torch and ORT steps and both see the same machine load
    first = None
    for line in sys.stdin:
        if line.strip() != "step":
            break
        start = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss = model(ids, types, mask, labels, sop_labels)
        loss.backward()
        ms = (time.perf_counter() - start) * 1000
        first = first if first is not None else loss.item()
        print(json.dumps({"ms": ms}), flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"loss": first, "peak_rss_mb": peak_mb, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
