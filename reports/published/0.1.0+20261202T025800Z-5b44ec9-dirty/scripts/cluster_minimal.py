"""Scratch: does any num_ctas=2 kernel run on this H200 (each case in its own process)?"""
import subprocess, sys
import torch
import cuda.tile as ct


def copy_k(a: ct.Array, b: ct.Array, BM: ct.Constant[int], BN: ct.Constant[int]):
    t = ct.load(a, (ct.bid(0), 0), shape=(BM, BN))
    ct.store(b, (ct.bid(0), 0), t)


def mma_k(a: ct.Array, w: ct.Array, b: ct.Array, BM: ct.Constant[int], BN: ct.Constant[int]):
    t = ct.load(a, (ct.bid(0), 0), shape=(BM, 64))
    u = ct.load(w, (0, 0), shape=(64, BN))
    acc = ct.mma(t, u, ct.zeros((BM, BN), dtype=ct.float32))
    ct.store(b, (ct.bid(0), 0), acc)


CASES = [("copy", 1, 128, 64), ("copy", 2, 128, 64), ("copy", 2, 64, 64), ("mma", 1, 64, 32), ("mma", 2, 64, 32),
         ("mma", 2, 128, 64)]
if len(sys.argv) == 1:
    for i in range(len(CASES)):
        r = subprocess.run([sys.executable, __file__, str(i)], capture_output=True, text=True)
        tail = [l for l in (r.stdout + r.stderr).splitlines() if "arn" not in l][-2:]
        print(i, CASES[i], "rc", r.returncode, " | ".join(tail), flush=True)
    sys.exit(0)
name, nc, BM, BN = CASES[int(sys.argv[1])]
a = torch.randn(BM * 8, 64, device="cuda", dtype=torch.bfloat16)
if name == "copy":
    b = torch.empty_like(a)
    ct.launch(torch.cuda.current_stream(), (8,), ct.kernel(copy_k, num_ctas=nc), (a, b, BM, 64))
    ref = a
else:
    w = torch.randn(64, BN, device="cuda", dtype=torch.bfloat16)
    b = torch.empty(BM * 8, BN, device="cuda", dtype=torch.float32)
    ct.launch(torch.cuda.current_stream(), (8,), ct.kernel(mma_k, num_ctas=nc), (a, w, b, BM, BN))
    ref = a.float() @ w.float()
torch.cuda.synchronize()
print("ok max err", (b.float() - ref.float()).abs().max().item())
