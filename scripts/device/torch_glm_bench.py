"""The same GLM encoder computation in PyTorch, on the same inputs, for a same-run comparison
with `streamrag bench glm` (run on the device machine, where PyTorch is installed).

A T5 encoder whose attention takes an external bias gathered from bucket ids, exactly as the
Rust encoder does: embeddings, per layer RMS norm -> attention (no 1/sqrt(d) scaling, bias +
mask added) -> residual -> RMS norm -> relu feed-forward -> residual, final RMS norm, entity
mean-pooling left out (a matmul). Random weights of the same dimensions; the inputs are the
batch-1 tensors the Rust benchmark wrote with --dump-inputs.

    python torch_glm_bench.py --inputs DIR --models small,base --batch 1,32 --dtype bf16
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

PRESETS = {"small": (512, 2048, 6, 8), "base": (768, 3072, 12, 12), "large": (1024, 4096, 24, 16)}
MASK_BIAS = -1e30


class Encoder(torch.nn.Module):
    def __init__(self, d_model, d_ff, layers, heads, buckets=32 + 3, vocab=32128):
        super().__init__()
        self.heads, self.dk = heads, 64
        inner = heads * 64
        self.embed = torch.nn.Embedding(vocab, d_model)
        self.table = torch.nn.Parameter(torch.randn(buckets + 1, heads) * 0.02)
        with torch.no_grad():
            self.table[-1] = MASK_BIAS
        mk = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict(dict(q=mk(d_model, inner), k=mk(d_model, inner), v=mk(d_model, inner), o=mk(inner, d_model),
                                     wi=mk(d_model, d_ff), wo=mk(d_ff, d_model)))
            for _ in range(layers))
        self.n1 = torch.nn.ParameterList(torch.nn.Parameter(torch.ones(d_model)) for _ in range(layers))
        self.n2 = torch.nn.ParameterList(torch.nn.Parameter(torch.ones(d_model)) for _ in range(layers))
        self.nf = torch.nn.Parameter(torch.ones(d_model))

    @staticmethod
    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    def forward(self, ids, buckets, token_mask):
        b, l = ids.shape
        bias = self.table[buckets.long()].permute(0, 3, 1, 2)  # (B, H, L, L)
        x = self.embed(ids)
        for blk, w1, w2 in zip(self.blocks, self.n1, self.n2):
            h = self.rms(x, w1)
            sp = lambda t: t.view(b, l, self.heads, self.dk).transpose(1, 2)
            a = F.scaled_dot_product_attention(sp(blk["q"](h)), sp(blk["k"](h)), sp(blk["v"](h)), attn_mask=bias.to(h.dtype), scale=1.0)
            x = x + blk["o"](a.transpose(1, 2).reshape(b, l, -1))
            x = x + blk["wo"](F.relu(blk["wi"](self.rms(x, w2))))
        return self.rms(x, self.nf) * token_mask.unsqueeze(-1).to(x.dtype)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--inputs", required=True)
    p.add_argument("--models", default="small,base")
    p.add_argument("--batch", default="1,32")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    dev = torch.device(a.device)
    rows = []
    for m in a.models.split(","):
        t = load_file(f"{a.inputs}/inputs-{m}.safetensors")
        enc = Encoder(*PRESETS[m]).to(dev, dtype).eval()
        for b in [int(x) for x in a.batch.split(",")]:
            ids = t["input_ids"].to(torch.int64).to(dev).repeat(b, 1)
            bk = t["buckets"].to(torch.int64).to(dev).repeat(b, 1, 1)
            tm = t["token_mask"].to(dev).repeat(b, 1)
            with torch.inference_mode():
                for _ in range(3):
                    enc(ids, bk, tm)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                times = []
                for _ in range(a.iters):
                    s = time.perf_counter()
                    enc(ids, bk, tm)
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    times.append((time.perf_counter() - s) * 1e3)
            times.sort()
            p50, p95 = times[len(times) // 2], times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else float("nan")
            rows.append(dict(model=m, batch=b, tokens=ids.shape[1], p50_ms=p50, p95_ms=p95, qps=b * 1e3 / p50, peak_mib=peak))
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
