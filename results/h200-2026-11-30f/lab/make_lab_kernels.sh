#!/usr/bin/env bash
# Writes the lab kernels of 2026-11-30f's calls 2, 3, 7, 8 and 14 beside this script:
#   tc_head.cl  kernels/nf4_forward_tc.cl at 75c366a (the session's start; call 3)
#   tc_lab.cl   04237ea's kernel + tc_lab.patch  (a working version with the lab switches
#               LAB_NOX, LAB_NOMMA, LAB_NOSHFL, LAB_NOLDS, LAB_DSPLIT; call 2)
#   tc_lab7.cl  04237ea's kernel + tc_lab7.patch (LAB_NOLOAD, LAB_NOX, LAB_NOSHFL,
#               LAB_NOMMA; calls 7 and 8)
#   tc_lab14.cl 6eaae28's kernel + tc_lab14.patch (TC_ADDR, TC_FMA; call 14)
#   read_pad_lab.cl  ../../h200-2026-11-30e/lab/read_tc_lab.cl + read_pad_lab.patch (local
#               memory padding that holds the warps per SM down; call 7)
# Git ignores them: run this in the checkout before a device call and name them in the
# call's carry (the device machine has no git history).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
git show 75c366a:kernels/nf4_forward_tc.cl > tc_head.cl
for k in tc_lab tc_lab7; do
  git show 04237ea:kernels/nf4_forward_tc.cl > $k.cl
  patch -s $k.cl $k.patch
done
git show 6eaae28:kernels/nf4_forward_tc.cl > tc_lab14.cl
patch -s tc_lab14.cl tc_lab14.patch
cp ../../h200-2026-11-30e/lab/read_tc_lab.cl read_pad_lab.cl
patch -s read_pad_lab.cl read_pad_lab.patch
