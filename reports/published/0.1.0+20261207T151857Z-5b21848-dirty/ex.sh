#!/bin/bash
# ex.sh NAME SHA ARGS...: on whichever card came, explore_cutile with ARGS into /root/e/NAME.json (log beside it),
# the clocks before and after; /root/e packed into $OUT/e.tgz.
set -u
NAME=$1; SHA=$2; shift 2
nvidia-smi -L
rm -f pub.tar.xz
E=/root/e; mkdir -p $E
nvidia-smi -q -d CLOCK > $E/clocks-$NAME.txt
date -u +%FT%TZ > $E/times-$NAME.txt
SSD_REQUIRE_GPU=1 SSD_GIT_COMMIT=$SHA timeout 420 nox --no-venv -s explore -- $E/$NAME.json "$@" > $E/$NAME.log 2>&1
echo rc=$? >> $E/$NAME.log
date -u +%FT%TZ >> $E/times-$NAME.txt
grep -v "compiling, gating\|UserWarning\|_warn_once" $E/$NAME.log | tail -60
tar -czf $OUT/e.tgz -C /root e
