# ocltk_npy: NumPy .npy reader/writer used by the ocltk CLI. include() this from cli/CMakeLists.txt.
add_library(ocltk_npy STATIC ${CMAKE_CURRENT_LIST_DIR}/npy.cpp)
target_include_directories(ocltk_npy PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(ocltk_npy PUBLIC ocltk)  # the bounded file reader (ocltk/bounded_file.hpp)
target_compile_features(ocltk_npy PUBLIC cxx_std_17)
set_target_properties(ocltk_npy PROPERTIES CXX_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
