"""PyTorch peer for bench/engine.ts: the same ALBERT-for-pretraining step (forward, MLM + SOP loss,
backward; no optimizer) written in plain torch, timed on the CPU. Also an independent reference for
test/engine/torch-parity.test.ts: with {"check": {"weights": file, "batch": file}} it loads an HF
model.safetensors and an HF-named batch JSON, and prints the losses and every gradient by HF name.

Usage: engine_torch.py '<json>' where json = {"config": {AlbertConfig fields}, "batch": B, "seq": S,
"threads": t}. Then each "step" line on stdin runs one step and prints {"ms", "cpu_ms"}; any other line (or EOF)
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

    def hf_names(self):
        """AlbertForPreTraining state-dict name -> parameter of this module."""
        layer = "albert.encoder.albert_layer_groups.0.albert_layers.0."
        linear = lambda name, m: {name + ".weight": m.weight, name + ".bias": m.bias}
        return {
            "albert.embeddings.word_embeddings.weight": self.word.weight,
            "albert.embeddings.position_embeddings.weight": self.pos.weight,
            "albert.embeddings.token_type_embeddings.weight": self.tok.weight,
            **linear("albert.embeddings.LayerNorm", self.emb_ln),
            **linear("albert.encoder.embedding_hidden_mapping_in", self.map_in),
            **linear(layer + "full_layer_layer_norm", self.full_ln),
            **linear(layer + "attention.query", self.q),
            **linear(layer + "attention.key", self.k),
            **linear(layer + "attention.value", self.v),
            **linear(layer + "attention.dense", self.dense),
            **linear(layer + "attention.LayerNorm", self.attn_ln),
            **linear(layer + "ffn", self.ffn),
            **linear(layer + "ffn_output", self.ffn_out),
            **linear("albert.pooler", self.pooler),
            "predictions.bias": self.pred_bias,
            **linear("predictions.dense", self.pred_dense),
            **linear("predictions.LayerNorm", self.pred_ln),
            **linear("sop_classifier.classifier", self.sop),
        }

    def forward(self, ids, types, mask, labels, sop_labels):
        B, S = ids.shape
        H, nh = self.c["hiddenSize"], self.c["numAttentionHeads"]
        d = H // nh
        pos = torch.arange(S, device=ids.device).unsqueeze(0)
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
        return mlm + sop, mlm, sop


def read_safetensors(path):
    """F32 tensors of a safetensors file (8-byte header length, JSON header, raw bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        raw = bytearray(data[8 + n + begin : 8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(e["shape"])
    return out


def check(c, spec):
    model = Albert(c)
    params = model.hf_names()
    with torch.no_grad():
        for name, t in read_safetensors(spec["weights"]).items():
            params[name].copy_(t)
    with open(spec["batch"]) as f:
        b = json.load(f)
    loss, mlm, sop = model(*(torch.tensor(b[k]) for k in ("input_ids", "token_type_ids", "attention_mask", "labels", "sentence_order_label")))
    loss.backward()
    grads = {name: p.grad.flatten().tolist() for name, p in params.items()}
    print(json.dumps({"loss": loss.item(), "mlm_loss": mlm.item(), "sop_loss": sop.item(), "grads": grads}))


def main():
    args = json.loads(sys.argv[1])
    torch.set_num_threads(args.get("threads", 1))
    if "check" in args:
        return check(args["config"], args["check"])
    torch.manual_seed(0)
    c, B, S = args["config"], args["batch"], args["seq"]
    model = Albert(c)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c["vocabSize"], (B, S), generator=g)
    labels = torch.where(torch.rand(B, S, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    types = (torch.arange(S) >= S // 2).long().expand(B, S)
    mask = torch.ones(B, S, dtype=torch.long)
    sop_labels = torch.randint(0, 2, (B,), generator=g)
    # serve: one line per command on stdin ("step" → {"ms", "cpu_ms"}, "quit" → summary), so the bench can
    # interleave torch and ORT steps and both see the same machine load
    first = None
    for line in sys.stdin:
        if line.strip() != "step":
            break
        start, cpu_start = time.perf_counter(), time.process_time()
        model.zero_grad(set_to_none=False)
        loss = model(ids, types, mask, labels, sop_labels)[0]
        loss.backward()
        ms = (time.perf_counter() - start) * 1000
        cpu_ms = (time.process_time() - cpu_start) * 1000
        first = first if first is not None else loss.item()
        print(json.dumps({"ms": ms, "cpu_ms": cpu_ms}), flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"loss": first, "peak_rss_mb": peak_mb, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
