#!/bin/bash
# go2.sh SHA: the dstate-64 explore; the chooser patched as pick2.py says; then the correctness and stability suites
# and the benchmark at 1K-4K x dstate 64 with it; all into $OUT.
set -u
SHA=$1
bash .device/ex.sh w64 $SHA --seqlen 1024 2048 4096 8192 --dstate 64 --reps 30 --only "walk64" "serial-state" "walk wide segmented occ1 lat4" > /dev/null 2>&1
grep -v "compiling, gating\|UserWarning\|_warn_once" /root/e/w64.log | tail -30
P=$(python3 .device/pick2.py /root/e/w64.json)
echo "picked: '$P'"
set -- $P
if [ "${1:-}" = serial ]; then sed "s/__LAT__/$2/g" .device/serial64.patch | patch -p1
elif [ "${1:-}" = wseg ]; then sed -e "s/__LAT__/$2/g" -e "s/ __WHY__//" .device/wideseg.patch | patch -p1; fi
if [ -n "${1:-}" ]; then
  echo "$P" > /root/e/picked.txt
  S=/root/s; mkdir -p $S
  export SSD_REQUIRE_GPU=1 SSD_GIT_COMMIT=$SHA
  for suite in correctness stability; do
    SSD_RUN_DIR=$S/run timeout 100 python3 -m pytest -q -p no:cacheprovider -m matrix validation/test_$suite.py > $S/$suite.log 2>&1; tail -1 $S/$suite.log
  done
  SSD_RUN_DIR=$S/b64 timeout 150 nox --no-venv -s benchmark -- --seqlen 1024 2048 4096 --dstate 64 > $S/b64.log 2>&1; echo rc=$? >> $S/b64.log
  grep -v "^nox >" $S/b64.log | grep "\] l=\|rc=" | tail -12
  tar -czf $OUT/s.tgz -C /root s
fi
tar -czf $OUT/e.tgz -C /root e
