#!/bin/bash
# make_lab_kernels.sh OUTDIR: diagnostic copies of nf4_forward_lut.cl (this folder; not shipped),
# each with one part of the work taken out, for the lab harness (lab.cpp, the "lut" grid):
#   lut_noload.cl    codes made up from the row and slice (scales 1): no code or scale loads
#   lut_nolookup.cl  the 8 bytes summed as integers (no table lookups; tables still built)
#   lut_nobuild.cl   no table build (the lookups read whatever the table holds)
#   lut_readonly.cl  no build and no lookups: the loads and barriers alone
set -e
out=${1:?usage: make_lab_kernels.sh OUTDIR}
src=$(dirname "$0")/nf4_forward_lut.cl
mkdir -p "$out"
sed -e 's|    code\[j\] = lane_codes\[(size_t)(q\[j\] + sl) \* 4\];|    code[j] = (uint2)(q[j] * 2654435761u + (uint)sl, (uint)sl * 40503u + q[j]);|' \
    -e 's|    sc\[j\] = scales\[(q\[j\] + sl) >> block_shift\];|    sc[j] = 1.0f;|' "$src" > "$out/lut_noload.cl"
sed -e 's|^  return even + odd;|  return (float)((v.x \& 0x0F0F0F0Fu) + (v.y \& 0x0F0F0F0Fu));|' "$src" > "$out/lut_nolookup.cl"
sed -e 's|          if (t < live) lut_build(table, cb, lane, warp, xh_now\[t\], xl_now\[t\]);|          ;|' "$src" > "$out/lut_nobuild.cl"
sed -e 's|          if (t < live) lut_build(table, cb, lane, warp, xh_now\[t\], xl_now\[t\]);|          ;|' \
    -e 's|^  return even + odd;|  return (float)((v.x \& 0x0F0F0F0Fu) + (v.y \& 0x0F0F0F0Fu));|' "$src" > "$out/lut_readonly.cl"
for f in noload nolookup nobuild readonly; do
  cmp -s "$src" "$out/lut_$f.cl" && { echo "make_lab_kernels.sh: lut_$f.cl is unchanged (pattern lost)" >&2; exit 1; }
done
# Each variant must differ in exactly the intended places.
[ "$(diff "$src" "$out/lut_noload.cl" | grep -c '^>')" = 2 ]
[ "$(diff "$src" "$out/lut_nolookup.cl" | grep -c '^>')" = 1 ]
[ "$(diff "$src" "$out/lut_nobuild.cl" | grep -c '^>')" = 1 ]
[ "$(diff "$src" "$out/lut_readonly.cl" | grep -c '^>')" = 2 ]
