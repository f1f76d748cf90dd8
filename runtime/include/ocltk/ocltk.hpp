// Everything an engine needs: #include <ocltk/ocltk.hpp> and link ocltk::ocltk.
#pragma once

#include "ocltk/device.hpp"
#include "ocltk/element_type.hpp"
#include "ocltk/family.hpp"
#include "ocltk/gemm_nt.hpp"
#include "ocltk/lora.hpp"
#include "ocltk/nf4.hpp"
#include "ocltk/params.hpp"
#include "ocltk/profile.hpp"
#include "ocltk/profile_db.hpp"
#include "ocltk/program_cache.hpp"
#include "ocltk/runtime.hpp"
#include "ocltk/status.hpp"
