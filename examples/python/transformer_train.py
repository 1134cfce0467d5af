#!/usr/bin/env python3
"""A torch.nn.Transformer training loop on the simulated NPU.

    msptictl run --report -- python3 transformer_train.py --steps 5

A sequence-to-sequence nn.Transformer (GELU, dropout) with embeddings and
an output projection, trained with AdamW on random token batches and a
causal target mask.  The device runs MatMul and BatchMatMul (attention,
feed-forward), SoftmaxV2/SoftmaxGrad, LayerNorm/LayerNormGrad,
Gelu/GeluGrad, DropOutGenMaskV3 + DropOutDoMask, GatherV2 (embedding),
LogSoftmaxV2/NLLLoss (the loss) and one ApplyAdamW per parameter.
"""

import argparse
import time

import torch

import mspti
import mspti.npusim.torch as npu


class Seq2Seq(torch.nn.Module):
    def __init__(self, vocab, d_model, heads, layers, ff):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        self.transformer = torch.nn.Transformer(
            d_model=d_model, nhead=heads, num_encoder_layers=layers,
            num_decoder_layers=layers, dim_feedforward=ff, dropout=0.1,
            activation="gelu", batch_first=True)
        self.proj = torch.nn.Linear(d_model, vocab)

    def forward(self, src, tgt, tgt_mask):
        h = self.transformer(self.embed(src), self.embed(tgt),
                             tgt_mask=tgt_mask)
        return self.proj(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version",
                    version="%(prog)s " + mspti.__version__)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--ff", type=int, default=1024)
    args = ap.parse_args()

    torch.manual_seed(0)
    model = Seq2Seq(args.vocab, args.d_model, args.heads, args.layers,
                    args.ff).npu()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(args.seq)
    mask = mask.npu()
    model.train()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        src = torch.randint(0, args.vocab, (args.batch, args.seq))
        tgt = torch.randint(0, args.vocab, (args.batch, args.seq + 1))
        with mspti.mstx.range("step"):
            src, tgt = src.npu(), tgt.npu()
            logits = model(src, tgt[:, :-1], mask)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, args.vocab), tgt[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss.item()
    npu.synchronize()
    wall = time.perf_counter() - t0
    s = npu.stats()
    print("transformer training: %d steps, batch %d x %d tokens, "
          "%.1f ms/step; kernels %d" % (args.steps, args.batch, args.seq,
                                        wall * 1e3 / args.steps,
                                        s.get("kernels", 0)))


if __name__ == "__main__":
    main()
