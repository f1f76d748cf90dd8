#!/usr/bin/env bash
# Writes the lab kernels of 2026-11-30g's device calls 1 and 3 beside their patches:
#   call1/tc_call1.cl  bce967e's kernels/nf4_forward_tc.cl + call1/tc_call1.patch (TC_ADDR and
#                      TC_FMA for every type at RT >= 2, and the lab switch TC_PRMT: which of
#                      a step's 4 products decode rows g by permutes); the bench binary of
#                      call 1 was built from it
#   call3/tc_l2pf.cl   bce967e's kernel + call3/tc_l2pf.patch (TC_L2PF, TC_L2D: L2 prefetch)
# Call 2's lab ran bce967e's kernel itself. Git ignores the outputs: run this in the checkout
# before a device call and name them in the call's carry (the device has no git history).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
git show bce967e:kernels/nf4_forward_tc.cl > call1/tc_call1.cl
patch -s call1/tc_call1.cl call1/tc_call1.patch
git show bce967e:kernels/nf4_forward_tc.cl > call3/tc_l2pf.cl
patch -s call3/tc_l2pf.cl call3/tc_l2pf.patch
