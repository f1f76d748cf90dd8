#!/usr/bin/env bash
# maxnreg A/B through the program cache: A builds from source into /tmp/cA; B is A's cache
# with `.maxnreg 128` added to every entry (patch_maxnreg.py); C the same with 96.
set -u
here=$(cd "$(dirname "$0")" && pwd); out=$1; t0=$(date +%s)
F=${F:-'nf4_(forward|backward)/(mixtral.*rows(8|64)|fine.*rows(64))/decode/(ours|ours_bf16)/'}
mark() { echo "$1 at +$(( $(date +%s) - t0 )) s" >> "$out/marks.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/marks.txt"
bench() {  # CACHE TAG LIMIT
  OCLTK_CACHE_DIR=$1 timeout "$3" "$here/ocltk_bench_nf4" --ocltk_profile="$here/nvidia-h200.yaml" --ocltk_calls=20 \
    --benchmark_filter="$F" > "$out/$2.txt" 2>&1
  mark "$2 exit $?"
}
bench /tmp/cA A 200
python3 "$here/patch_maxnreg.py" /tmp/cA /tmp/cB 128 >> "$out/marks.txt"
python3 "$here/patch_maxnreg.py" /tmp/cA /tmp/cC 96 >> "$out/marks.txt"
(cd /tmp/cB && md5sum *.bin) > /tmp/cB.md5
bench /tmp/cB B128 150
(cd /tmp/cB && md5sum -c --quiet /tmp/cB.md5) >> "$out/marks.txt" 2>&1; mark "cB entries checked (no lines above = none rewritten)"
bench /tmp/cA A2 110
bench /tmp/cC C96 90
mkdir -p /tmp/ptx && for f in /tmp/cB/*.bin; do python3 - "$f" <<'PY'
import struct,sys
b=open(sys.argv[1],'rb').read(); p=16; ks,=struct.unpack_from('<Q',b,p); p+=8+ks; bs,_=struct.unpack_from('<QQ',b,p)
open('/tmp/ptx/'+sys.argv[1].split('/')[-1][:-4]+'.ptx','wb').write(b[:p].replace(b'\0',b'')+b'\n//----\n'+b[p+16:p+16+bs].replace(b'\0',b''))
PY
done; tar czf "$out/ptxB.tgz" -C /tmp ptx
mark "all done"
