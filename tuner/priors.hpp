// What the tuner knows before it measures a device: the profiles shipped in configs/ and the
// best points of the recorded spaces (configs/priors/*.jsonl, derived from recordings by
// `ocltk tune --derive-priors`), both embedded in the tuner at build time so that a build
// tree that was never installed knows them too. A device nobody tuned is seeded from the
// nearest devices they describe: their best points are measured first, they steer the
// guided model, and how close a class comes to what they reached decides how much of the
// budget it gets (docs/tuning.md, "A device nobody tuned").
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ocltk/device.hpp"
#include "ocltk/profile.hpp"
#include "record.hpp"
#include "search.hpp"

namespace ocltk::tuner {

// One class of one known device: the best points measured on one problem.
struct PriorClass {
  std::string kernel, shape_class;
  Problem problem;
  // Verified, fastest first (by a recording's time where one measured the point: add_recording),
  // complete in today's tables.
  std::vector<Evaluation> points;
  double builtin_ms = 0;  // the built-in default on that device and problem; 0 where unknown
};

struct PriorDevice {
  ProfileDevice device;  // from its profile's header, else from its recording's
  std::vector<std::string> sources;
  std::vector<PriorClass> classes;
  // Its profiles' entries, pinned ones without a time too: what the runtime chooses on it
  // today, which its recordings' times (older code, older runs) may rank below other points.
  Profile chosen;
};

// Which known devices seed a run: every one (the default), every one but this device's own
// profiles and recordings (a device nobody tuned, on a device somebody did: `--priors
// others`), or none (`--priors none`, `--cold`).
enum class PriorUse { kAll, kOthers, kNone };
const char* to_string(PriorUse use);
std::optional<PriorUse> parse_prior_use(const std::string& name);

// How near a known device is to `device`, smaller is nearer: 0 the same device (name), 1 the
// same architecture (same_architecture: PoCL targets whatever the vendor), 2 the same vendor
// and kind (CL device type), 3 the same platform and kind, 4 the same kind; -1 another kind,
// never used (a GPU's best points say little about a CPU's).
int prior_distance(const ProfileDevice& known, const DeviceInfo& device);

// Known devices from files: profiles (YAML, schema 1) and prior files (recordings). A prior
// file's device takes the header fields it lacks from a profile of the same device name.
// Points of algorithms or parameter values today's tables no longer have are skipped, as
// are classes left without a point. `files` holds (name, text) pairs; throws
// Error(kInvalidArgument) naming the file for one that is neither.
std::vector<PriorDevice> read_priors(const std::vector<std::pair<std::string, std::string>>& files);

// The devices known from configs/ at build time (read once).
const std::vector<PriorDevice>& embedded_priors();

// What the nearest known devices say about one class of a run.
struct ClassPrior {
  int distance = -1;
  // Their best points for the class, fastest first (the devices' lists interleaved), on the
  // problem of each device nearest to the run's (problem_distance).
  std::vector<Evaluation> points;
  // Their profiles' choices for the problem (the entry the runtime picks there,
  // Profile::find), nearest devices first; time_ms 0 for an entry pinned without one. Not a
  // choice its own device's recording outran (kOutrunRatio).
  std::vector<Evaluation> chosen;
  // Best over built-in default, the share of its time their search saved: the geometric mean
  // over the devices that know both; 0 where none does.
  double best_ratio = 0;
  // The best time, from a device at distance 0 measured on the same problem; 0 otherwise.
  double best_ms = 0;
  // At distance 1 or more: each nearest device's best point of each other algorithm than its
  // best's, where it came within kContenderMargin of its best (nearest devices first, each
  // device's fastest first). Another device's order between algorithms that close says
  // nothing here: `gemm_nt` lora_expand's best xgemm and tiled points were 0.7 % apart on the
  // Xeon; on an EPYC of the same compiler target that tiled point was the best measured, 1.46x
  // faster than any xgemm point.
  std::vector<Evaluation> contenders;
  // At distance 1 or more: each nearest device's points within kContenderMargin of its best
  // (nearest devices first, each device's fastest first). Their order there says nothing
  // here either; the points a class measures first are chosen among them by how far apart
  // they are (prior_candidates in tuner/tuner.cpp).
  std::vector<Evaluation> near_ties;
  // The algorithms a nearest (or lending) device's full list of the class (kFullList points
  // or more, a recording's fastest; a derived prior file keeps 24) leaves out though its
  // recordings of the kernel hold them in another class (its search had them), where no
  // nearest (or lending) device lists or chose them for the class: there each of their
  // points ran behind all of that list, so the guided opening gives them no point (tuner.cpp,
  // outrun_algorithms). An algorithm newer than the recordings, or one they were made
  // without, is none.
  std::set<std::string> outrun;
  std::vector<std::string> devices;  // their names, nearest first
  // Where no nearest device lists kFullList points of the class (a profile's entry, a short
  // recording), the nearest devices further on that do, at `lender_distance`: their points
  // come after the nearest devices' in `points`, `near_ties` and `contenders`, and their lists
  // count for `outrun` (class_prior); `distance`, `chosen` and `best_ratio` stay the nearest
  // devices'. Empty and -1: none.
  std::vector<std::string> lenders;
  int lender_distance = -1;
  // Where the nearest devices share this device's architecture but none its vendor (distance
  // 1: PoCL's compiler target, whoever made the CPU), the profiles' choices for the problem
  // (Profile::find) of the devices of its vendor and kind (distance 2), in their order, each
  // device's name beside it in `vendor_devices`: not one a nearest device chose too or another
  // of them chose before, nor one its own device's recording outran (kOutrunRatio, as for
  // `chosen`). The vendor's cores set the caches and memory a memory-bound class runs from: on
  // the AVX-512 AMD EPYC, gemm_nt gemv's 20-minute tune's best point was the Zen 2 EPYC's shipped
  // choice and the Xeon recording's fifth point, and first tunes seeded by the Xeon missed it in
  // four of five runs (1.22x and 1.30x in the last two). Measured after the nearest devices' and
  // the sibling classes' points (prior_candidates in tuner/tuner.cpp); nothing else of those
  // devices counts here.
  std::vector<Evaluation> vendor_chosen;
  std::vector<std::string> vendor_devices;
};

// How many points a known device's class lists, at least, for the algorithms it leaves out to
// count as outrun there (ClassPrior::outrun): a recording's fastest, not a profile's one entry.
constexpr std::size_t kFullList = 16;

// Within this ratio of a known device's best, a point of another algorithm is a contender
// (ClassPrior::contenders): the spread of one point's figures between runs, up to about 10 %
// on the 2-core PoCL hosts (results/first-tune/README.md).
constexpr double kContenderMargin = 1.1;

// Where a device's recording of a class timed the algorithm of its profile's choice, in one run
// beside the others, over this ratio behind its best point (of another algorithm), that choice
// is not measured first (ClassPrior::chosen leaves it out): the recording's comparison, made in
// one run, says more about which algorithm wins there than an entry of another run. Well past
// the spread of one point between runs (up to about a quarter on the 2-core PoCL hosts): the
// Xeon's shipped nf4_backward small_batch entry (tiled, from a 3-minute tune) against its
// recording's stream at 1.59x less; the EPYC's 20-minute tune kept stream too.
constexpr double kOutrunRatio = 1.5;

// The known devices nearest to `device` under `use` (all at the smallest distance), and
// what they say about `kernel`/`shape_class` (on the problem nearest to `problem` where
// given), with the lists the devices further on lend where theirs are short
// (ClassPrior::lenders); nullopt where none knows the class.
std::optional<ClassPrior> class_prior(const std::vector<PriorDevice>& known, const DeviceInfo& device, PriorUse use,
                                      const std::string& kernel, const std::string& shape_class,
                                      const Problem* problem);

// Within this ratio of its class's best, a known device's point of an algorithm stands in for
// that algorithm in another class of the kernel (algorithm_elsewhere). Between classes and
// devices the order of two algorithms moved by about this much: on the Xeon, gemm_nt gemv's
// best reduce point ran 1.52x behind its best tiled one; on the Zen 2 EPYC, gemv_half's best
// reduce point ran 1.36x ahead of its best tiled one (a long tune each).
constexpr double kElsewhereMargin = 2.0;

// How far (problem_distance, where another input width counts as a 16-fold size) another
// class's point may come from to stand in for an algorithm (algorithm_elsewhere): a 256-fold in
// all, gemm_nt gemv for small_batch_half (m 16, 16-bit input), not for lora_shrink_half (m 4096,
// n 16), whose best reduce point on the Zen 2 EPYC ran 2.4x behind its best tiled one.
constexpr double kElsewhereReach = 8;

// A known device's point of one class, for another.
struct PointElsewhere {
  Evaluation point;
  std::string shape_class;  // the class it was measured in
};

// The known devices at `distance` from `device` (a class's nearest, ClassPrior::distance; not
// the device itself under PriorUse::kOthers): their fastest point of `algorithm` in each class
// of `kernel` but `shape_class` within kElsewhereReach of `problem` where it came within
// kElsewhereMargin of that class's best, nearest class first (among equals in the devices'
// order). What stands in for an algorithm a class knows by its built-in default alone
// (tuner.cpp, builtin_stand_in).
std::vector<PointElsewhere> algorithm_elsewhere(const std::vector<PriorDevice>& known, const DeviceInfo& device,
                                                PriorUse use, int distance, const std::string& kernel,
                                                const std::string& shape_class, const Problem& problem,
                                                const std::string& algorithm);

// `ocltk tune --derive-priors`: a prior file of the recordings' device: a header naming it,
// then per recorded class its `top` fastest verified points (algorithms today's tables no
// longer have are skipped) and the built-in default where it was recorded, so the file
// says how much the class's search saved. The recordings must be of one device; throws
// Error(kInvalidArgument) otherwise.
void write_priors(std::ostream& out, const std::vector<Recording>& recordings, std::size_t top);

}  // namespace ocltk::tuner
