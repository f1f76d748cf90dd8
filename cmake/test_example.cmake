# ctest: installs ocltk into a temporary prefix, builds examples/ against the installed
# package (find_package(ocltk)) and runs it with a saved profile.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_example.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
foreach(step
    "install;--install;${BUILD_DIR};--prefix;${WORK_DIR}/prefix"
    "configure;-S;${SOURCE_DIR}/examples;-B;${WORK_DIR}/build;-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix;-DCMAKE_BUILD_TYPE=Release"
    "build;--build;${WORK_DIR}/build")
  list(POP_FRONT step name)
  execute_process(COMMAND ${CMAKE_COMMAND} ${step} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "example ${name} failed (${rc}):\n${out}\n${err}")
  endif()
endforeach()
file(GLOB profiles "${WORK_DIR}/prefix/share/ocltk/configs/*.yaml")
list(LENGTH profiles n)
if(n EQUAL 0)
  message(FATAL_ERROR "the install shipped no profiles under share/ocltk/configs")
endif()
list(GET profiles 0 profile)
execute_process(COMMAND ${WORK_DIR}/build/lora_apply --profile ${profile} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lora_apply failed (${rc})")
endif()
