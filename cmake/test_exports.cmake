# ctest: libocltk.so.0 has the soname libocltk.so.0 and exports exactly the functions ocltk.h
# declares (nm -D), nothing of the C++ runtime, Boost or yaml-cpp.
#   cmake -DNM=nm -DOBJDUMP=objdump -DLIBRARY=libocltk.so.0.1.0 -DHEADER=ocltk.h -P test_exports.cmake
execute_process(COMMAND ${OBJDUMP} -p ${LIBRARY} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT dynamic MATCHES "SONAME +libocltk\\.so\\.0\n")
  message(FATAL_ERROR "${LIBRARY}: no soname libocltk.so.0 (objdump -p exit ${rc})")
endif()
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D ${LIBRARY} failed (${rc})")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${symbols}")
set(exported "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] +" "" name "${line}")
  list(APPEND exported "${name}")
endforeach()
file(READ ${HEADER} header)
string(REGEX MATCHALL "OCLTK_API [^;(]*[ *](ocltk_[a-z0-9_]+)\\(" declarations "${header}")
set(declared "")
foreach(d IN LISTS declarations)
  string(REGEX REPLACE ".*[ *](ocltk_[a-z0-9_]+)\\($" "\\1" name "${d}")
  list(APPEND declared "${name}")
endforeach()
list(LENGTH declared count)
# The operations the C API promises (issue #28: every operation of the C++ API): a declaration
# the pattern above no longer reads, or one dropped from the header, fails here by name.
set(required
    ocltk_runtime_open ocltk_runtime_wrap ocltk_runtime_release ocltk_last_error ocltk_version
    ocltk_gemm_nt ocltk_gemm_nt_accum
    ocltk_lora_apply ocltk_lora_shrink ocltk_lora_expand ocltk_lora_group_rows ocltk_lora_gather_rows
    ocltk_lora_scatter_rows
    ocltk_nf4_forward ocltk_nf4_backward ocltk_nf4_route ocltk_nf4_scatter ocltk_nf4_quantize ocltk_nf4_dequantize
    ocltk_choose_gemm_nt ocltk_choose_lora ocltk_choose_nf4 ocltk_last_choice)
set(absent ${required})
list(REMOVE_ITEM absent ${declared})
if(absent)
  message(FATAL_ERROR "${HEADER}: no declaration read for [${absent}] (of ${count} read): the header or the pattern changed")
endif()
set(extra ${exported})
list(REMOVE_ITEM extra ${declared})
set(missing ${declared})
list(REMOVE_ITEM missing ${exported})
if(extra OR missing)
  message(FATAL_ERROR "${LIBRARY}: exported but not in ocltk.h: [${extra}]; declared but not exported: [${missing}]")
endif()
message("${LIBRARY}: soname libocltk.so.0, exports the ${count} functions of ocltk.h and nothing else")
