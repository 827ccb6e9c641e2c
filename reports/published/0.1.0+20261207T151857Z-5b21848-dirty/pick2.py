"""pick2.py EXPLORE.json: which chooser patch the explore supports at dstate 64, printed as 'serial LAT', 'wseg 4' or
nothing: the serial wide walk (16-wide tiles, stacked rows) if it beats both the default and the wide two-segment walk
at 4096 tokens by 1% and loses by at most 1% at 1024 and 2048; else the wide two-segment walk if it beats the default
by 1% at 4096."""
import json, sys
t = {}
for r in json.load(open(sys.argv[1]))["rows"]:
    if r["dstate"] == 64 and r["gate"] == "pass":
        t[(r["seqlen"], r["candidate"])] = r["kernel_us"]["median"]
d4, w4 = t.get((4096, "default")), t.get((4096, "walk wide segmented occ1 lat4"), float("inf"))
ser = {k: v for (L, k), v in t.items() if L == 4096 and k in ("walk64 wide n16 lat4", "walk64 wide n16 lat6")}
print(f"4096: default {d4} wseg {w4} serial {ser}", file=sys.stderr)
if d4 and ser:
    k = min(ser, key=ser.get)
    short_ok = all(t.get((L, k), float("inf")) <= 1.01 * t.get((L, "default"), 0) for L in (1024, 2048))
    print(f"best {k}; 1024/2048 within 1% of the default: {short_ok}", file=sys.stderr)
    if ser[k] < 0.99 * min(d4, w4) and short_ok:
        print("serial", k.rsplit("lat", 1)[1]); sys.exit()
if d4 and w4 < 0.99 * d4:
    print("wseg 4")
