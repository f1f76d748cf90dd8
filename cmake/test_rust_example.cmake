# ctest: installs ocltk into a temporary prefix, builds examples/rust/lora_apply.rs with rustc
# (no crates) against it, finding the library through the installed pkg-config file, and runs it.
#   cmake -DRUSTC=rustc -DPKG_CONFIG=pkg-config -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_rust_example.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed (${rc}): ${err}")
endif()
file(GLOB_RECURSE pc_files "${WORK_DIR}/prefix/*/ocltk.pc")
if(NOT pc_files)
  message(FATAL_ERROR "the install has no pkgconfig/ocltk.pc")
endif()
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir ${pc_file} DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir} ${PKG_CONFIG} --libs-only-L ocltk
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0 OR NOT flags MATCHES "-L")
  message(FATAL_ERROR "pkg-config --libs-only-L ocltk failed (${rc}): '${flags}' ${err}")
endif()
string(REGEX MATCHALL "-L[^ ]+" dirs "${flags}")
set(link_args "")
foreach(d IN LISTS dirs)
  string(SUBSTRING "${d}" 2 -1 dir)
  list(APPEND link_args -L ${dir} -C link-arg=-Wl,-rpath,${dir})
endforeach()
execute_process(COMMAND ${RUSTC} --edition 2021 -O ${SOURCE_DIR}/examples/rust/lora_apply.rs ${link_args}
                        -o ${WORK_DIR}/lora_apply
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rustc failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${WORK_DIR}/lora_apply --tokens 5 --hidden 256 --rank 8 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lora_apply (Rust) failed (${rc})")
endif()
