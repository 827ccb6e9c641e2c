"""Scratch: bisect which part of a walk faults under num_ctas=2 (each case in its own process)."""
import subprocess, sys
import torch
import cuda.tile as ct


def walk_k(x: ct.Array, B: ct.Array, g: ct.Array, states: ct.Array, end: ct.Array, dec: ct.Array,
           CHUNK: ct.Constant[int], BP: ct.Constant[int], BN: ct.Constant[int], STORE_STATES: ct.Constant[bool],
           STORE_DEC: ct.Constant[bool], LOAD_G: ct.Constant[bool], XT: ct.Constant[bool], NCH: ct.Constant[int]):
    b = ct.bid(1)
    n_tile = ct.bid(0)
    h = ct.zeros((BP, BN), dtype=ct.float32)
    d = ct.zeros((1,), dtype=ct.float32)
    for c in range(NCH):
        X = ct.load(x, (b, c, 0, 0), shape=(1, CHUNK, 1, BP), padding_mode=ct.PaddingMode.ZERO).reshape((CHUNK, BP))
        Bc = ct.load(B, (b, c, 0, n_tile), shape=(1, CHUNK, 1, BN),
                     padding_mode=ct.PaddingMode.ZERO).reshape((CHUNK, BN))
        if LOAD_G:
            gc = ct.load(g, (b, 0, c), shape=(1, 1, CHUNK), padding_mode=ct.PaddingMode.ZERO).reshape((CHUNK,))
            gl = ct.extract(gc, (CHUNK - 1,), shape=(1,))
            Bc = (Bc.astype(ct.float32) * ct.exp2(ct.minimum(gl - gc, 0.0)).reshape((CHUNK, 1))).astype(ct.bfloat16)
            h = h * ct.exp2(gl).reshape((1, 1))
            d = d + gl
        if STORE_STATES:
            ct.store(states, (b, 0, c, 0, n_tile), h.reshape((1, 1, 1, BP, BN)).astype(ct.bfloat16))
        if XT:
            h = ct.mma(X.transpose(), Bc, h)
        else:
            h = ct.mma(ct.full((BP, CHUNK), 0.01, dtype=ct.bfloat16), Bc, h)
    ct.store(end, (b, 0, 0, n_tile), h.reshape((1, 1, BP, BN)))
    if STORE_DEC:
        ct.store(dec, (b, 0, 0), d.reshape((1, 1, 1)))


# (store_states, store_dec, load_g, xt)
CASES = [(0, 0, 0, 0), (0, 0, 0, 1), (1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1), (1, 1, 1, 1), (1, 1, 1, 0)]
if len(sys.argv) == 1:
    for i in range(len(CASES)):
        for nc in (1, 2):
            r = subprocess.run([sys.executable, __file__, str(i), str(nc)], capture_output=True, text=True)
            tail = [l for l in (r.stdout + r.stderr).splitlines() if "arn" not in l][-1:]
            print(i, CASES[i], "nc", nc, "rc", r.returncode, " | ".join(tail), flush=True)
    sys.exit(0)
ss, sd, lg, xt = CASES[int(sys.argv[1])]
nc = int(sys.argv[2])
bat, L, P, N, CH = 2, 1024, 64, 64, 128
x = torch.randn(bat, L, 1, P, device="cuda", dtype=torch.bfloat16)
B = torch.randn(bat, L, 1, N, device="cuda", dtype=torch.bfloat16)
g = -torch.rand(bat, 1, L, device="cuda")
states = torch.zeros(bat, 1, L // CH, P, N, device="cuda", dtype=torch.bfloat16)
end = torch.zeros(bat, 1, P, N, device="cuda")
dec = torch.zeros(bat, 1, 1, device="cuda")
BN = 32
ct.launch(torch.cuda.current_stream(), (N // BN, bat), ct.kernel(walk_k, num_ctas=nc, occupancy=2),
          (x, B, g, states, end, dec, CH, P, BN, bool(ss), bool(sd), bool(lg), bool(xt), L // CH))
torch.cuda.synchronize()
print("ok", end.abs().sum().item(), states.float().abs().sum().item(), dec.sum().item())
