// Parameter tables against the kernel sources, the legal space, shape classes and
// launch geometry: everything that must agree before a kernel is ever launched.
#include <algorithm>
#include <regex>
#include <set>
#include <tuple>

#include "fixture.hpp"
#include "ocltk/lora.hpp"
#include "ocltk/nf4.hpp"

namespace {

using ocltk::AlgorithmSpec;
using ocltk::GemmProblem;
using ocltk::Params;

const ocltk::KernelFamily& family() { return ocltk::gemm_nt_family(); }

// NAME -> default of each `#ifndef NAME` / `#define NAME default` block of a source, as the
// preprocessor takes them: the first block of a name sets its default; a later block of the
// same name, or one of a name the source has already #defined outright (a value it fixes,
// such as tcs's LDSM over the shared header's default), is dead and not read.
std::map<std::string, std::string> ifndef_defaults(const std::string& source) {
  std::map<std::string, std::string> found;
  std::set<std::string> fixed;
  static const std::regex ifndef(R"(^\s*#\s*ifndef\s+(\w+)\s*$)");
  static const std::regex define(R"(^\s*#\s*define\s+(\w+)\s+(\S+))");
  std::istringstream in(source);
  std::string line, pending;
  for (; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, ifndef)) {
      pending = found.count(m[1]) || fixed.count(m[1]) ? "" : std::string(m[1]);
      if (!pending.empty()) found[pending] = "";  // a guard without a #define right after it reads as no default
    } else if (!pending.empty()) {
      if (std::regex_search(line, m, define) && m[1] == pending) found[pending] = m[2];
      pending.clear();
    } else if (std::regex_search(line, m, define)) {
      fixed.insert(m[1]);
    }
  }
  return found;
}

TEST(ParamTables, EveryIfndefIsInTheTableAndBack) {
  std::vector<const AlgorithmSpec*> algorithms;
  for (const ocltk::KernelFamily* f :
       {&family(), &ocltk::lora_shrink_family(), &ocltk::lora_expand_family(), &ocltk::lora_apply_family()})
    for (const AlgorithmSpec& a : f->algorithms) algorithms.push_back(&a);
  for (const AlgorithmSpec* each : algorithms) {
    const AlgorithmSpec& algorithm = *each;
    SCOPED_TRACE(algorithm.name + " (" + algorithm.source_name + ")");
    const std::map<std::string, std::string> in_source = ifndef_defaults(ocltk::kernel_source(algorithm.source_name));
    ASSERT_FALSE(in_source.empty());
    for (const auto& [name, value] : in_source)
      EXPECT_NE(algorithm.find(name), nullptr) << "#ifndef " << name << " has no row in the parameter table";
    for (const ocltk::ParamSpec& spec : algorithm.params) {
      const auto it = in_source.find(spec.name);
      if (it == in_source.end()) {
        ADD_FAILURE() << "table parameter " << spec.name << " has no #ifndef block in the source";
        continue;
      }
      EXPECT_EQ(it->second, std::to_string(spec.default_value))
          << spec.name << ": #define default in the source differs from ParamSpec::default_value";
      EXPECT_FALSE(spec.meaning.empty()) << spec.name;
      EXPECT_NE(std::find(spec.allowed.begin(), spec.allowed.end(), spec.default_value), spec.allowed.end())
          << spec.name << " default " << spec.default_value << " is not among its allowed values";
    }
  }
}

TEST(ParamTables, EveryAlgorithmSourceIsEmbedded) {
  const std::vector<std::string> names = ocltk::kernel_source_names();
  for (const AlgorithmSpec& algorithm : family().algorithms)
    EXPECT_NE(std::find(names.begin(), names.end(), algorithm.source_name), names.end()) << algorithm.source_name;
  EXPECT_THROW(ocltk::kernel_source("no_such_kernel.cl"), ocltk::Error);
}

TEST(ParamTables, BuildOptionsDefineEveryParameter) {
  for (const AlgorithmSpec& algorithm : family().algorithms) {
    const std::string options = algorithm.build_options(algorithm.defaults());
    for (const ocltk::ParamSpec& spec : algorithm.params)
      EXPECT_NE(options.find("-D" + spec.name + "=" + std::to_string(spec.default_value)), std::string::npos)
          << algorithm.name << ": " << options;
  }
}

TEST(ParamTables, CompleteFillsDefaultsAndRejectsBadInput) {
  const AlgorithmSpec* tiled = family().find_algorithm("tiled");
  ASSERT_NE(tiled, nullptr);
  const Params completed = tiled->complete({{"MWG", 32}});
  EXPECT_EQ(completed.at("MWG"), 32);
  EXPECT_EQ(completed.size(), tiled->params.size());
  EXPECT_EQ(completed.at("NWG"), tiled->find("NWG")->default_value);

  try {
    (void)tiled->complete({{"BOGUS", 1}});
    ADD_FAILURE() << "an unknown parameter was accepted";
  } catch (const ocltk::Error& e) {
    EXPECT_EQ(e.code(), ocltk::ErrorCode::kProfile);
    EXPECT_NE(std::string(e.what()).find("BOGUS"), std::string::npos) << e.what();
  }
  try {
    (void)tiled->complete({{"MDIMC", 3}});
    ADD_FAILURE() << "a value outside the allowed list was accepted";
  } catch (const ocltk::Error& e) {
    EXPECT_EQ(e.code(), ocltk::ErrorCode::kProfile);
    EXPECT_NE(std::string(e.what()).find("MDIMC"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3"), std::string::npos) << e.what();
  }
}

TEST(ParamTables, ViolationNamesTheConstraint) {
  const AlgorithmSpec* tiled = family().find_algorithm("tiled");
  const auto bad = tiled->violation(tiled->complete({{"MWG", 128}, {"MDIMC", 8}}), nullptr);
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->find("MWG / MDIMC"), std::string::npos) << *bad;

  const AlgorithmSpec* reduce = family().find_algorithm("reduce");
  const auto bad_reduce = reduce->violation(reduce->complete({{"WGS", 16}, {"RW", 32}}), nullptr);
  ASSERT_TRUE(bad_reduce.has_value());
  EXPECT_NE(bad_reduce->find("WGS % RW"), std::string::npos) << *bad_reduce;

  // Device limits (workgroup shape, local memory) are skipped without limits and checked with them.
  ocltk::DeviceLimits tiny;
  tiny.max_work_group_size = 16;
  tiny.max_work_item_sizes = {16, 16, 16};
  const Params big_group = tiled->complete({{"MDIMC", 8}, {"NDIMC", 8}});
  EXPECT_FALSE(tiled->violation(big_group, nullptr).has_value());
  EXPECT_TRUE(tiled->violation(big_group, &tiny).has_value());
}

// nf4_forward's tc is searched only where mma.sync m16n8k16 exists (NVIDIA, sm_80 or
// newer); its points stay legal everywhere (an engine may still ask for them).
TEST(ParamTables, TensorCoreAlgorithmIsSearchedOnlyWithTensorMma) {
  const AlgorithmSpec* tc = ocltk::nf4_forward_family().find_algorithm("tc");
  ASSERT_NE(tc, nullptr);
  EXPECT_TRUE(tc->search_needs_tensor_mma);
  ocltk::DeviceLimits gpu;
  gpu.local_mem_bytes = 48 * 1024;
  gpu.gpu = true;
  EXPECT_TRUE(tc->search_space(&gpu).empty()) << "a GPU without tensor_mma";
  EXPECT_TRUE(tc->search_space(nullptr).empty());
  EXPECT_FALSE(tc->legal_space(&gpu).empty());
  gpu.tensor_mma = true;
  EXPECT_EQ(tc->search_space(&gpu).size(), tc->legal_space(&gpu).size());

  ocltk::DeviceInfo h200;
  h200.platform = "NVIDIA CUDA";
  h200.architecture = "sm_90";
  EXPECT_TRUE(ocltk::DeviceLimits::of(h200).tensor_mma);
  h200.architecture = "sm_75";
  EXPECT_FALSE(ocltk::DeviceLimits::of(h200).tensor_mma) << "no bf16 m16n8k16 before sm_80";
  h200.architecture = "sm_90";
  h200.platform = "Portable Computing Language";
  EXPECT_FALSE(ocltk::DeviceLimits::of(h200).tensor_mma) << "no inline PTX";
}

// gemm_nt's tc: searched only with tensor_mma and then only where the H200 measurements leave
// it a chance (ldmatrix, swizzled or padded rows, 4+ warps, GM and REGS refined around the
// best); constraints refused by name; local memory counts the emulation's words only where
// they are declared; the element types and TF32 modes are build variants, not parameters.
TEST(ParamTables, GemmNtTensorCoreTable) {
  const AlgorithmSpec* tc = family().find_algorithm("tc");
  ASSERT_NE(tc, nullptr);
  EXPECT_TRUE(tc->search_needs_tensor_mma);
  ocltk::DeviceLimits gpu;
  gpu.local_mem_bytes = 48 * 1024;
  gpu.gpu = true;
  EXPECT_TRUE(tc->search_space(&gpu).empty()) << "a GPU without tensor_mma";
  gpu.tensor_mma = gpu.ptx_binaries = true;
  const std::vector<Params> space = tc->search_space(&gpu);
  EXPECT_GT(space.size(), 100u);
  EXPECT_LT(space.size(), 2500u);
  for (const Params& p : space) {
    SCOPED_TRACE(ocltk::format_params(p));
    EXPECT_EQ(p.at("LDSM"), 1);
    EXPECT_NE(p.at("SWZ"), 0);
    EXPECT_EQ(p.at("GM"), 8);
    EXPECT_EQ(p.at("REGS"), 0);
    EXPECT_GE(p.at("MWARPS") * p.at("NWARPS"), 4);
    EXPECT_LE(tc->local_mem_bytes(p, gpu), gpu.local_mem_bytes);
  }
  EXPECT_EQ(tc->refinements(tc->defaults(), &gpu).size(), 3u + 4u) << "GM's three other values, REGS' four";

  const std::pair<Params, const char*> illegal[] = {
      {{{"MWG", 32}, {"MWARPS", 4}}, "MWG % (16 * MWARPS) == 0"},
      {{{"NWG", 32}, {"NWARPS", 4}, {"LDSM", 1}}, "(NWG / NWARPS) % 16 == 0"},
      {{{"CPASYNC", 0}, {"STAGES", 3}}, "CPASYNC == 0 implies STAGES == 2"},
      {{{"MWG", 256}, {"NWG", 256}, {"KCH", 16}, {"MWARPS", 1}, {"NWARPS", 2}}, "chunks a work-item copies"},
      {{{"MWG", 256}, {"NWG", 128}, {"MWARPS", 1}, {"NWARPS", 2}}, "accumulator registers"},
  };
  for (const auto& [partial, named] : illegal) {
    const std::optional<std::string> bad = tc->violation(tc->complete(partial), nullptr);
    ASSERT_TRUE(bad.has_value()) << named;
    EXPECT_NE(bad->find(named), std::string::npos) << *bad;
  }
  EXPECT_FALSE(tc->violation(tc->complete({{"NWG", 32}, {"NWARPS", 4}, {"LDSM", 0}}), nullptr).has_value());

  // Defaults: three stages of 256 rows of 4 chunks, swizzled (no padding); the emulation adds
  // 4 warps' 4·MI + 2·NI words of 32 lanes (MI 4, NI 8). Padded rows (SWZ 2) add 16 bytes a
  // row. The lab's 3×TF32 point: four stages of 2 chunks.
  ocltk::DeviceLimits emulated = gpu;
  emulated.ptx_binaries = false;
  EXPECT_EQ(tc->local_mem_bytes(tc->defaults(), gpu), 3u * 256 * 64);
  EXPECT_EQ(tc->local_mem_bytes(tc->defaults(), emulated), 3u * 256 * 64 + 4u * 32 * 128);
  EXPECT_EQ(tc->local_mem_bytes(tc->complete({{"STAGES", 2}, {"SWZ", 2}}), gpu), 2u * 256 * 80);
  EXPECT_EQ(tc->local_mem_bytes(tc->complete({{"KCH", 2}, {"STAGES", 4}, {"SWZ", 1}}), gpu), 4u * 256 * 32);

  using ocltk::ElementType;
  using ocltk::GemmPrecision;
  EXPECT_EQ(ocltk::gemm_nt_launch_variant(ElementType::f32, ElementType::f32), "");
  EXPECT_EQ(ocltk::gemm_nt_launch_variant(ElementType::f32, ElementType::f32, "xgemm", GemmPrecision::tf32x3), "")
      << "SIMT f32 programs do not depend on the precision";
  EXPECT_EQ(ocltk::gemm_nt_launch_variant(ElementType::f32, ElementType::f32, "tc", GemmPrecision::tf32),
            " -DIN_TYPE=0 -DOUT_TYPE=0 -DSPLIT=1");
  EXPECT_EQ(ocltk::gemm_nt_launch_variant(ElementType::f32, ElementType::f32, "tc", GemmPrecision::tf32x3),
            " -DIN_TYPE=0 -DOUT_TYPE=0 -DSPLIT=3");
  EXPECT_EQ(ocltk::gemm_nt_launch_variant(ElementType::bf16, ElementType::f32, "tc", GemmPrecision::tf32),
            " -DIN_TYPE=2 -DOUT_TYPE=0");
  EXPECT_EQ(tc->tuned_variant, ocltk::gemm_nt_launch_variant(ElementType::bf16, ElementType::bf16, "tc"));
}

// tc's LW 1 (loads ahead issued after the wait for the group being multiplied) needs loads
// ahead: with PF 0 it is refused by name, and it doubles only the points with PF >= 1.
TEST(ParamTables, TensorCoreLoadWaitNeedsLoadsAhead) {
  const AlgorithmSpec* tc = ocltk::nf4_forward_family().find_algorithm("tc");
  ASSERT_NE(tc, nullptr);
  const std::optional<std::string> bad = tc->violation(tc->complete({{"LW", 1}, {"PF", 0}}), nullptr);
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->find("LW 1 needs PF >= 1"), std::string::npos) << *bad;
  EXPECT_FALSE(tc->violation(tc->complete({{"LW", 1}, {"PF", 1}}), nullptr).has_value());
  EXPECT_FALSE(tc->violation(tc->complete({{"LW", 0}, {"PF", 0}}), nullptr).has_value());
  ocltk::DeviceLimits gpu;
  gpu.local_mem_bytes = 48 * 1024;
  gpu.gpu = true;
  gpu.tensor_mma = true;
  std::size_t lw1 = 0, lw0_ahead = 0;
  for (const Params& p : tc->search_space(&gpu)) {
    if (p.at("LW") == 1) {
      ++lw1;
      EXPECT_GE(p.at("PF"), 1);
    } else if (p.at("PF") >= 1) {
      ++lw0_ahead;
    }
  }
  EXPECT_GT(lw1, 0u);
  EXPECT_EQ(lw1, lw0_ahead);
}

// warps' local memory counts the reduction's partials only where they are declared (no
// warp shuffles: not NVIDIA's platform), so x staged for K = 4096 (XL 4096, 16 KiB beside the
// 32 KiB pair table) fits NVIDIA's 48 KiB exactly and nothing else's, and two staged tile rows
// fit neither; the rejection names the bytes.
TEST(ParamTables, WarpsStagedXFitsOnlyWithoutLocalPartials) {
  const AlgorithmSpec* warps = ocltk::nf4_forward_family().find_algorithm("warps");
  ASSERT_NE(warps, nullptr);
  ocltk::DeviceLimits nvidia, other;
  nvidia.local_mem_bytes = other.local_mem_bytes = 48 * 1024;
  nvidia.gpu = other.gpu = true;
  nvidia.ptx_binaries = true;
  const Params staged = warps->complete({{"XL", 4096}, {"TR", 1}, {"WGS", 256}, {"CW", 32}, {"RB", 8}});
  EXPECT_EQ(warps->local_mem_bytes(staged, nvidia), 48u * 1024);
  EXPECT_FALSE(warps->violation(staged, &nvidia).has_value());
  const std::optional<std::string> bad = warps->violation(staged, &other);
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->find("local memory of 58368 bytes exceeds the device's 49152"), std::string::npos) << *bad;
  const Params two_rows = warps->complete({{"XL", 4096}, {"TR", 2}});
  EXPECT_TRUE(warps->violation(two_rows, &nvidia).has_value());
  EXPECT_FALSE(warps->violation(warps->complete({{"XL", 2048}, {"TR", 2}}), &nvidia).has_value());
  // Without staging, the codebook takes its place: the estimate the table had before XL.
  EXPECT_EQ(warps->local_mem_bytes(warps->defaults(), other), 64u + 32768 + 4 * 128 * 9);
  std::size_t staged_points = 0;
  for (const Params& p : warps->search_space(&nvidia)) staged_points += p.at("XL") == 4096;
  EXPECT_GT(staged_points, 0u);
  for (const Params& p : warps->search_space(&other)) EXPECT_NE(p.at("XL"), 4096) << ocltk::format_params(p);
}

// XS and FR of the forward tc are read only on its f32 path: a problem with 16-bit input
// searches them at their defaults alone (a quarter of the points, none lost otherwise), an
// f32 problem all of them; tables without such parameters are unchanged.
TEST(ParamTables, InputWidthParametersAreSearchedOnlyForTheirWidth) {
  ocltk::DeviceLimits gpu;
  gpu.local_mem_bytes = 48 * 1024;
  gpu.gpu = true;
  gpu.tensor_mma = true;
  const AlgorithmSpec* tc = ocltk::nf4_forward_family().find_algorithm("tc");
  ASSERT_NE(tc, nullptr);
  const std::vector<Params> all = tc->search_space(&gpu);
  EXPECT_EQ(tc->search_space(&gpu, 32), all);
  const std::vector<Params> half = tc->search_space(&gpu, 16);
  ASSERT_FALSE(half.empty());
  EXPECT_EQ(half.size() * 4, all.size());
  std::set<Params> expected;
  for (Params p : all)
    if (p.at("XS") == 1 && p.at("FR") == 8) expected.insert(p);
  EXPECT_EQ(std::set<Params>(half.begin(), half.end()), expected);
  for (const ocltk::KernelFamily* family : {&ocltk::gemm_nt_family(), &ocltk::nf4_backward_family()})
    for (const AlgorithmSpec& a : family->algorithms) EXPECT_EQ(a.search_space(&gpu, 16), a.search_space(&gpu));
}

// The LoRA kernels' accumulators follow the device: a CPU searches vector ones only (VA 1),
// a GPU scalar ones only (VA 0), any other kind both; the points left out stay legal and
// launchable (a profile or an engine may ask for them), and nothing but VA is cut on a CPU.
TEST(ParamTables, LoraAccumulatorsAreSearchedAsTheDeviceWantsThem) {
  ocltk::DeviceInfo info;
  for (const char* type : {"cpu", "gpu", "accelerator", "other"}) {
    info.type = type;
    const ocltk::DeviceLimits of = ocltk::DeviceLimits::of(info);
    EXPECT_EQ(of.cpu, info.type == "cpu") << type;
    EXPECT_EQ(of.gpu, info.type == "gpu") << type;
  }
  ocltk::DeviceLimits other;  // the same limits but for the kind of device
  other.local_mem_bytes = 48 * 1024;
  ocltk::DeviceLimits cpu = other, gpu = other;
  cpu.cpu = true;
  gpu.gpu = true;
  std::size_t algorithms = 0;
  for (const ocltk::KernelFamily* f :
       {&ocltk::lora_shrink_family(), &ocltk::lora_expand_family(), &ocltk::lora_apply_family()}) {
    for (const AlgorithmSpec& a : f->algorithms) {
      SCOPED_TRACE(f->name + "/" + a.name);
      ++algorithms;
      const std::vector<Params> legal = a.legal_space(&cpu), on_cpu = a.search_space(&cpu),
                                on_gpu = a.search_space(&gpu), on_other = a.search_space(&other);
      ASSERT_FALSE(on_cpu.empty());
      ASSERT_FALSE(on_gpu.empty());
      std::size_t legal_vector = 0;
      for (const Params& p : legal) legal_vector += p.at("VA") == 1;
      EXPECT_EQ(on_cpu.size(), legal_vector) << "a CPU keeps every legal point with VA 1";
      EXPECT_LT(on_cpu.size(), on_other.size());
      for (const Params& p : on_cpu) ASSERT_EQ(p.at("VA"), 1) << ocltk::format_params(p);
      for (const Params& p : on_gpu) ASSERT_EQ(p.at("VA"), 0) << ocltk::format_params(p);
      EXPECT_EQ(on_other.size(), legal.size()) << "a device of another kind searches both";
      const Params scalar = a.complete({{"VA", 0}});
      EXPECT_FALSE(a.violation(scalar, &cpu).has_value()) << "VA 0 stays legal on a CPU";
    }
  }
  EXPECT_EQ(algorithms, 4u);  // shrink's tiled, expand's tiled, apply's fused and split
}

// REGS, the register target, is legal other than 0 only where binaries are PTX (NVIDIA):
// elsewhere the legal space holds the compiler's choice alone, and a profile that asks for
// a target is refused by name.
TEST(ParamTables, RegisterTargetIsLegalOnlyWithPtxBinaries) {
  ocltk::DeviceLimits gpu;
  gpu.local_mem_bytes = 48 * 1024;
  gpu.gpu = true;
  gpu.tensor_mma = true;
  ocltk::DeviceLimits nvidia = gpu;
  nvidia.ptx_binaries = true;
  std::size_t listing = 0;
  for (const ocltk::KernelFamily* f : {&ocltk::nf4_forward_family(), &ocltk::nf4_backward_family()}) {
    for (const AlgorithmSpec& a : f->algorithms) {
      const ocltk::ParamSpec* regs = a.find(ocltk::kRegisterTarget);
      if (regs == nullptr) continue;
      SCOPED_TRACE(f->name + "/" + a.name);
      ++listing;
      EXPECT_EQ(regs->default_value, 0);
      EXPECT_EQ(regs->allowed.front(), 0);
      EXPECT_NE(a.build_options(a.complete({{"REGS", 128}})).find(" -DREGS=128"), std::string::npos);
      const std::vector<Params> plain = a.legal_space(&gpu), ptx = a.legal_space(&nvidia);
      ASSERT_FALSE(plain.empty());
      for (const Params& p : plain) ASSERT_EQ(ocltk::register_target(p), 0) << ocltk::format_params(p);
      // The points without a target are the same on both but for warps and tc_tiled, whose
      // local memory depends on the platform (WarpsStagedXFitsOnlyWithoutLocalPartials; the
      // emulated product's words and the codebook of tc_tiled): there the PTX device's hold
      // the other's.
      const bool platform_local_memory = a.name == "warps" || a.name == "tc_tiled";
      std::set<Params> untargeted;
      for (const Params& p : ptx)
        if (ocltk::register_target(p) == 0) untargeted.insert(p);
      for (const Params& p : plain) EXPECT_EQ(untargeted.count(p), 1u) << ocltk::format_params(p);
      if (!platform_local_memory) {
        EXPECT_EQ(untargeted.size(), plain.size());
      }
      EXPECT_EQ(ptx.size(), untargeted.size() * regs->allowed.size()) << "REGS is independent of every constraint";
      // The search sees REGS 0 alone; the tuner measures the other values around its best.
      EXPECT_TRUE(regs->refined_last);
      const std::vector<Params> searched = a.search_space(&nvidia);
      ASSERT_FALSE(searched.empty());
      for (const Params& p : searched) ASSERT_EQ(ocltk::register_target(p), 0) << ocltk::format_params(p);
      if (!platform_local_memory) {
        EXPECT_EQ(searched.size(), a.search_space(&gpu).size());
      }
      EXPECT_EQ(a.refinements(a.defaults(), &nvidia).size(), regs->allowed.size() - 1);
      EXPECT_TRUE(a.refinements(a.defaults(), &gpu).empty());
      const std::vector<Params> around = a.refinements(a.complete({{"REGS", 168}}), &nvidia);
      ASSERT_EQ(around.size(), regs->allowed.size() - 1);
      EXPECT_EQ(around.front(), a.defaults()) << "168's refinements start from 0, in table order";
      EXPECT_EQ(a.refinements(a.defaults(), &nvidia).front().at("REGS"), 128) << "the H200's winners first";
      const Params capped = a.complete({{"REGS", 168}});
      EXPECT_FALSE(a.violation(capped, &nvidia).has_value());
      EXPECT_FALSE(a.violation(capped, nullptr).has_value()) << "legal in the table; the device decides";
      const auto bad = a.violation(capped, &gpu);
      ASSERT_TRUE(bad.has_value());
      EXPECT_NE(bad->find("REGS = 168"), std::string::npos) << *bad;
      EXPECT_NE(bad->find("PTX"), std::string::npos) << *bad;
    }
  }
  EXPECT_EQ(listing, 6u) << "nf4_forward's tc, tc_tiled and warps, nf4_backward's tc, tc_tiled and stream";
  EXPECT_EQ(ocltk::register_target({{"WGS", 64}}), 0);

  ocltk::DeviceInfo device;
  device.platform = "NVIDIA CUDA";
  EXPECT_TRUE(ocltk::DeviceLimits::of(device).ptx_binaries);
  device.platform = "Portable Computing Language";
  EXPECT_FALSE(ocltk::DeviceLimits::of(device).ptx_binaries);
}

class ParamsOnDevice : public ocltk_test::RuntimeTest {};

TEST_F(ParamsOnDevice, DefaultsAndBuiltinsAreLegal) {
  const ocltk::DeviceLimits device_limits = limits();
  for (const AlgorithmSpec& algorithm : family().algorithms) {
    const auto bad = algorithm.violation(algorithm.defaults(), &device_limits);
    EXPECT_FALSE(bad.has_value()) << algorithm.name << " defaults break: " << bad.value_or("");
  }
  ASSERT_EQ(family().builtin.size(), family().classes.size());
  for (const ocltk::ShapeClassSpec& cls : family().classes) {
    const ocltk::BuiltinChoice builtin = family().builtin_for(cls.name);
    const AlgorithmSpec* algorithm = family().find_algorithm(builtin.algorithm);
    ASSERT_NE(algorithm, nullptr) << cls.name << " -> " << builtin.algorithm;
    const auto bad = algorithm->violation(algorithm->complete(builtin.params), &device_limits);
    EXPECT_FALSE(bad.has_value()) << cls.name << " built-in breaks: " << bad.value_or("");
  }
}

TEST_F(ParamsOnDevice, LegalSpaceIsNonEmptyAndEveryPointHoldsEveryConstraint) {
  const ocltk::DeviceLimits device_limits = limits();
  for (const AlgorithmSpec& algorithm : family().algorithms) {
    SCOPED_TRACE(algorithm.name);
    const std::vector<Params> space = algorithm.legal_space(&device_limits);
    ASSERT_FALSE(space.empty());
    const std::vector<Params> unchecked = algorithm.legal_space(nullptr);
    EXPECT_GE(unchecked.size(), space.size());
    std::set<Params> distinct(space.begin(), space.end());
    EXPECT_EQ(distinct.size(), space.size()) << "duplicate points";
    EXPECT_NE(distinct.count(algorithm.defaults()), 0u) << "the defaults are not in the legal space";
    for (const Params& point : space) {
      ASSERT_EQ(point.size(), algorithm.params.size());
      for (const ocltk::ParamSpec& spec : algorithm.params) {
        const int v = point.at(spec.name);
        ASSERT_NE(std::find(spec.allowed.begin(), spec.allowed.end(), v), spec.allowed.end()) << spec.name << "=" << v;
      }
      for (const ocltk::Constraint& c : algorithm.constraints)
        ASSERT_TRUE(c.holds(point)) << ocltk::format_params(point) << " breaks " << c.name;
      ASSERT_LE(algorithm.work_group_size(point), device_limits.max_work_group_size);
      ASSERT_LE(algorithm.local_mem_bytes(point, device_limits), device_limits.local_mem_bytes);
    }
  }
}

TEST(ShapeClasses, BoundariesAndPrecedence) {
  struct Case {
    GemmProblem p;
    const char* want;
  };
  const Case cases[] = {
      {{1, 1, 1}, "gemv"},
      {{1, 10, 10}, "gemv"},  // gemv before lora_shrink (N <= 64) and lora_expand (K <= 64)
      {{1, 4096, 4096}, "gemv"},
      {{2, 64, 4096}, "lora_shrink"},
      {{2, 65, 4096}, "small_batch"},
      {{100, 64, 10}, "lora_shrink"},  // lora_shrink before lora_expand
      {{100, 65, 64}, "lora_expand"},
      {{100, 65, 65}, "large"},
      {{16, 65, 64}, "lora_expand"},  // lora_expand before small_batch
      {{16, 65, 65}, "small_batch"},
      {{17, 65, 65}, "large"},
      {{2, 4096, 4096}, "small_batch"},
      {{4096, 4096, 4096}, "large"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(ocltk::gemm_nt_shape_class(c.p), c.want) << "M=" << c.p.m << " N=" << c.p.n << " K=" << c.p.k;
  for (const ocltk::ShapeClassSpec& cls : family().classes) {
    EXPECT_FALSE(cls.rule.empty());
    for (bool cpu : {false, true})
      EXPECT_EQ(
          ocltk::gemm_nt_shape_class(ocltk::gemm_nt_class_problem(cls.name, cpu), ocltk::gemm_nt_class_input(cls.name),
                                     ocltk::gemm_nt_class_precision(cls.name)),
          cls.name)
          << "the representative problem of " << cls.name << " belongs to another class";
  }
  EXPECT_THROW(ocltk::gemm_nt_class_problem("huge", false), ocltk::Error);
}

// f32 large and LoRA launches that tc may compute under their precision have classes of their
// own (an entry tuned with tensor cores never serves an exact launch); gemv, small batches,
// 3×TF32 below K = 8 and 16-bit input ignore the precision.
// What tc refuses under each precision, and the names the API and the CLI parse.
TEST(ShapeClasses, PrecisionKeepsTf32EntriesApart) {
  using ocltk::ElementType;
  using ocltk::GemmPrecision;
  const GemmProblem large{100, 100, 100};
  EXPECT_EQ(ocltk::gemm_nt_shape_class(large, ElementType::f32, GemmPrecision::exact), "large");
  EXPECT_EQ(ocltk::gemm_nt_shape_class(large, ElementType::f32, GemmPrecision::tf32), "large_tf32");
  EXPECT_EQ(ocltk::gemm_nt_shape_class(large, ElementType::f32, GemmPrecision::tf32x3), "large_tf32x3");
  EXPECT_EQ(ocltk::gemm_nt_shape_class(large, ElementType::bf16, GemmPrecision::tf32x3), "large_half");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 100, 5}, ElementType::f32, GemmPrecision::tf32x3), "lora_expand");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 100, 5}, ElementType::f32, GemmPrecision::tf32), "lora_expand_tf32");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 100, 8}, ElementType::f32, GemmPrecision::tf32x3), "lora_expand_tf32x3");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 16, 100}, ElementType::f32, GemmPrecision::tf32x3), "lora_shrink_tf32x3");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 64, 100}, ElementType::f32, GemmPrecision::tf32), "lora_shrink_tf32");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 16, 100}, ElementType::f32, GemmPrecision::exact), "lora_shrink");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 16, 100}, ElementType::bf16, GemmPrecision::tf32), "lora_shrink_half");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({1, 100, 100}, ElementType::f32, GemmPrecision::tf32), "gemv");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({16, 100, 100}, ElementType::f32, GemmPrecision::tf32x3), "small_batch");
  for (const std::string exact : {"large", "lora_shrink", "lora_expand"})
    for (const auto& [suffix, precision] :
         {std::pair{"_tf32", GemmPrecision::tf32}, std::pair{"_tf32x3", GemmPrecision::tf32x3}}) {
      const std::string cls = exact + suffix;
      ASSERT_NE(family().find_class(cls), nullptr) << cls;
      EXPECT_EQ(ocltk::gemm_nt_exact_class(cls), exact);
      EXPECT_EQ(ocltk::gemm_nt_class_precision(cls), precision) << cls;
      EXPECT_EQ(ocltk::gemm_nt_class_input(cls), ElementType::f32);
      EXPECT_EQ(ocltk::gemm_nt_skinny_class(cls), exact == "lora_shrink") << cls;
      for (const bool cpu : {true, false}) {
        const GemmProblem p = ocltk::gemm_nt_class_problem(cls, cpu), q = ocltk::gemm_nt_class_problem(exact, cpu);
        EXPECT_EQ(std::tie(p.m, p.n, p.k), std::tie(q.m, q.n, q.k)) << cls << " is tuned on " << exact << "'s problem";
      }
      const ocltk::BuiltinChoice builtin = family().builtin_for(cls), exact_builtin = family().builtin_for(exact);
      EXPECT_EQ(builtin.algorithm, exact_builtin.algorithm) << cls;
      EXPECT_EQ(builtin.params, exact_builtin.params) << cls;
    }
  EXPECT_EQ(family().find_class("gemv_tf32"), nullptr);
  EXPECT_EQ(family().find_class("small_batch_tf32x3"), nullptr);
  EXPECT_EQ(ocltk::gemm_nt_class_precision("large_half"), GemmPrecision::exact);
  EXPECT_EQ(ocltk::gemm_nt_class_precision("lora_shrink"), GemmPrecision::exact);
  EXPECT_EQ(ocltk::gemm_nt_exact_class("gemv_half"), "gemv_half");
  EXPECT_EQ(ocltk::gemm_nt_exact_class("lora_expand"), "lora_expand");

  for (const GemmPrecision p : {GemmPrecision::exact, GemmPrecision::tf32, GemmPrecision::tf32x3})
    EXPECT_EQ(ocltk::parse_gemm_precision(ocltk::to_string(p)), p);
  EXPECT_EQ(ocltk::parse_gemm_precision("TF32"), std::nullopt);
  EXPECT_EQ(ocltk::parse_gemm_precision("fp32"), std::nullopt);

  EXPECT_NE(ocltk::gemm_nt_tc_refusal(large, ElementType::f32, GemmPrecision::exact).find("precision exact"),
            std::string::npos);
  EXPECT_EQ(ocltk::gemm_nt_tc_refusal(large, ElementType::f32, GemmPrecision::tf32), "");
  EXPECT_EQ(ocltk::gemm_nt_tc_refusal({5, 5, 8}, ElementType::f32, GemmPrecision::tf32x3), "");
  EXPECT_NE(ocltk::gemm_nt_tc_refusal({5, 5, 7}, ElementType::f32, GemmPrecision::tf32x3).find("K = 7"),
            std::string::npos);
  EXPECT_EQ(ocltk::gemm_nt_tc_refusal({5, 5, 1}, ElementType::f32, GemmPrecision::tf32), "");
  EXPECT_EQ(ocltk::gemm_nt_tc_refusal({5, 5, 1}, ElementType::f16, GemmPrecision::exact), "");
}

// TF32's bound adds the rounding of both operands, 2^-10 of sum |a·b| and a little; 3×TF32
// and exact are held to the f32 bound itself.
TEST(ErrorBound, Tf32AddsTheRoundingOfItsOperands) {
  using ocltk::ElementType;
  using ocltk::GemmPrecision;
  const double f32 = ocltk::gemm_nt_error_bound(100, 10.0, -0.5, 0.25, 1.0, ElementType::f32);
  EXPECT_EQ(ocltk::gemm_nt_error_bound(100, 10.0, -0.5, 0.25, 1.0, ElementType::f32, GemmPrecision::exact), f32);
  EXPECT_EQ(ocltk::gemm_nt_error_bound(100, 10.0, -0.5, 0.25, 1.0, ElementType::f32, GemmPrecision::tf32x3), f32);
  const double tf32 = ocltk::gemm_nt_error_bound(100, 10.0, -0.5, 0.25, 1.0, ElementType::f32, GemmPrecision::tf32);
  EXPECT_GT(tf32 - f32, 0.5 * 10.0 * std::ldexp(1.0, -10));
  EXPECT_LT(tf32 - f32, 0.5 * 10.0 * std::ldexp(1.0, -10) * 1.01);
}

// Every LoRA class's representative problem is filed under it, and its ranks and segments
// are what the tuner lays out: mixed ranks for several adapters.
TEST(ShapeClasses, LoraClassProblemsBelongToTheirClass) {
  for (const ocltk::KernelFamily* f :
       {&ocltk::lora_shrink_family(), &ocltk::lora_expand_family(), &ocltk::lora_apply_family()}) {
    ASSERT_EQ(f->classes.size(), f->builtin.size()) << f->name;
    for (const ocltk::ShapeClassSpec& cls : f->classes) {
      for (bool cpu : {false, true}) {
        const ocltk::LoraTuneProblem t = ocltk::lora_class_problem(cls.name, cpu);
        EXPECT_EQ(ocltk::lora_shape_class(t.problem.m, t.segments), cls.name) << f->name;
        const std::vector<std::int32_t> ranks = ocltk::lora_problem_ranks(t.problem);
        ASSERT_EQ(std::int64_t(ranks.size()), t.problem.adapters);
        EXPECT_EQ(*std::max_element(ranks.begin(), ranks.end()), t.problem.max_rank);
        if (t.problem.adapters > 1) {
          EXPECT_LT(*std::min_element(ranks.begin(), ranks.end()), t.problem.max_rank);
        }
        const std::vector<std::uint32_t> offsets = ocltk::lora_even_offsets(t.problem.m, t.segments);
        EXPECT_EQ(offsets.front(), 0u);
        EXPECT_EQ(std::int64_t(offsets.back()), t.problem.m);
      }
      const ocltk::BuiltinChoice builtin = f->builtin_for(cls.name);
      const AlgorithmSpec* algorithm = f->find_algorithm(builtin.algorithm);
      ASSERT_NE(algorithm, nullptr) << f->name << "/" << cls.name;
      EXPECT_FALSE(algorithm->violation(algorithm->complete(builtin.params), nullptr).has_value());
    }
  }
  EXPECT_THROW(ocltk::lora_class_problem("huge", false), ocltk::Error);
  // The problem an entry stores: shrink has no N, expand no K; 16-bit input names its width.
  const ocltk::LoraProblem p{16, 4096, 2048, 8, 64};
  const auto shrink = ocltk::lora_problem_of("lora_shrink", p, 8, ocltk::ElementType::bf16);
  EXPECT_EQ(shrink.count("n"), 0u);
  EXPECT_EQ(shrink.at("k"), 2048);
  EXPECT_EQ(shrink.at("input_bits"), 16);
  const auto expand = ocltk::lora_problem_of("lora_expand", p, 0, ocltk::ElementType::f32);
  EXPECT_EQ(expand.count("k"), 0u);
  EXPECT_EQ(expand.count("input_bits"), 0u);
  EXPECT_EQ(expand.at("segments"), 1);
}

TEST_F(ParamsOnDevice, GeometryCoversTheProblemWithWholeWorkgroups) {
  const GemmProblem problems[] = {{1, 1, 1}, {1, 127, 65}, {127, 1, 33}, {65, 127, 7}, {300, 257, 5}, {16, 4096, 8}};
  const ocltk::DeviceLimits device_limits = limits();
  for (const AlgorithmSpec& algorithm : family().algorithms) {
    const std::vector<Params> space = algorithm.legal_space(&device_limits);
    // Every 97th point: a spread over the space without walking all of it.
    for (std::size_t i = 0; i < space.size(); i += 97) {
      const Params& params = space[i];
      for (const GemmProblem& p : problems) {
        SCOPED_TRACE(algorithm.name + " {" + ocltk::format_params(params) + "} M=" + std::to_string(p.m) +
                     " N=" + std::to_string(p.n));
        const ocltk::LaunchGeometry g = ocltk::gemm_nt_geometry(algorithm.name, params, p);
        ASSERT_GT(g.local[0], 0u);
        ASSERT_GT(g.local[1], 0u);
        EXPECT_EQ(g.local[0] * g.local[1], algorithm.work_group_size(params));
        EXPECT_EQ(g.global[0] % g.local[0], 0u);
        EXPECT_EQ(g.global[1] % g.local[1], 0u);
        if (ocltk::gemm_nt_tensor_core_algorithm(algorithm.name)) {
          // One dimension: exactly one workgroup per tile of C (the kernel orders them).
          const std::int64_t tiles = ((p.m + g.tile_m - 1) / g.tile_m) * ((p.n + g.tile_n - 1) / g.tile_n);
          EXPECT_EQ(g.global[1], 1u);
          EXPECT_EQ(std::int64_t(g.global[0] / g.local[0]), tiles);
          continue;
        }
        const std::int64_t groups_n = std::int64_t(g.global[0] / g.local[0]);
        const std::int64_t groups_m = std::int64_t(g.global[1] / g.local[1]);
        EXPECT_GE(groups_n * g.tile_n, p.n);
        EXPECT_GE(groups_m * g.tile_m, p.m);
        EXPECT_LT((groups_n - 1) * g.tile_n, p.n) << "a whole workgroup column lies past N";
        EXPECT_LT((groups_m - 1) * g.tile_m, p.m) << "a whole workgroup row lies past M";
      }
    }
  }
  EXPECT_THROW(ocltk::gemm_nt_geometry("strassen", {}, {1, 1, 1}), ocltk::Error);
}

}  // namespace
