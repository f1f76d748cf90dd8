// Internal to the runtime (and its tests): how many workgroups the split backwards (stream,
// tc) divide each (expert, k tile)'s sweep over N into.
#pragma once

#include <cstdint>

#include "ocltk/nf4.hpp"

namespace ocltk::detail {

// Most bytes of partial sums a split backward keeps; beyond, it uses fewer splits.
constexpr std::int64_t kMaxSplitScratchBytes = std::int64_t(256) << 20;

// The splits of N: `nsplit` (the tuned NSPLIT), or more where the (expert, k tile) pairs of
// the `slots` experts the grid makes room for (at most g.experts; fewer in a compact launch,
// ActiveExperts in nf4.cpp) times nsplit would leave some of the device's `compute_units`
// without a workgroup (a profile tuned at many experts used at few: 8 experts × 8 k tiles
// are 64 workgroups on the H200's 132); at most N (each split has a row), and few enough
// that the partial sums (splits × rows × K f32) fit kMaxSplitScratchBytes; at least 1.
std::int64_t stream_splits(std::int64_t nsplit, const Nf4Geometry& g, std::int64_t rows, std::int64_t slots,
                           std::int64_t ktiles, std::int64_t compute_units);

}  // namespace ocltk::detail
