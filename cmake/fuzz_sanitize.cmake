# Sanitizer and fuzzing builds (issue 8). Included at the end of CMakeLists.txt, so every target
# already exists: the flags are attached per target, which works regardless of where a target
# was defined (CMAKE_CXX_FLAGS would also work here, but only for this directory).
#
#   -DDINOML_SANITIZE=address   ASan + UBSan (UBSan non-recovering: the first report fails)
#   -DDINOML_SANITIZE=thread    TSan
#   -DDINOML_FUZZ=ON            (clang only) ASan + UBSan + libFuzzer coverage on every target,
#                               plus the fuzz targets of fuzz/ (fuzz_ir, fuzz_artifact, ...)
# scripts/sanitize and scripts/fuzz drive these; see docs/reliability.md.

set(DINOML_SANITIZE "" CACHE STRING "Sanitizer for every target: address (ASan+UBSan), thread (TSan) or empty")
set_property(CACHE DINOML_SANITIZE PROPERTY STRINGS "" address thread)
option(DINOML_FUZZ "Build the libFuzzer targets in fuzz/ (requires clang)" OFF)

set(_dml_san_cflags "")
set(_dml_san_lflags "")
if(DINOML_SANITIZE STREQUAL "address")
  set(_dml_san_cflags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  set(_dml_san_lflags -fsanitize=address,undefined)
elseif(DINOML_SANITIZE STREQUAL "thread")
  set(_dml_san_cflags -fsanitize=thread -fno-omit-frame-pointer)
  set(_dml_san_lflags -fsanitize=thread)
elseif(NOT DINOML_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DINOML_SANITIZE='${DINOML_SANITIZE}': use address, thread or leave it empty")
endif()

if(DINOML_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DINOML_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++-14 "
                        "-DCMAKE_C_COMPILER=clang-14, or just run scripts/fuzz")
  endif()
  # fuzzer-no-link: coverage instrumentation everywhere; only the fuzz executables get the
  # libFuzzer main (-fsanitize=fuzzer below).
  set(_dml_san_cflags -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  set(_dml_san_lflags -fsanitize=address,undefined)
endif()

if(_dml_san_cflags)
  get_property(_dml_targets DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${_dml_targets})
    get_target_property(_type ${t} TYPE)
    if(_type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|STATIC_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      target_compile_options(${t} PRIVATE ${_dml_san_cflags})
      target_link_options(${t} PRIVATE ${_dml_san_lflags})
    endif()
  endforeach()
  message(STATUS "DinoML: sanitizer flags on all targets: ${_dml_san_cflags}")
endif()

if(DINOML_FUZZ)
  # A fuzz target = fuzz/fuzz_<name>.cpp + fuzz/fuzz_common.cpp, linked against the real
  # libraries (themselves instrumented above).
  file(GLOB _dml_fuzz_src CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.cpp)
  list(FILTER _dml_fuzz_src EXCLUDE REGEX ".*/fuzz_common\\.cpp$")
  foreach(src ${_dml_fuzz_src})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src} ${CMAKE_SOURCE_DIR}/fuzz/fuzz_common.cpp ${CMAKE_SOURCE_DIR}/src/cli/npy.cpp)
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/fuzz)
    target_link_libraries(${name} PRIVATE dinoml_compiler dinoml_runtime ${CMAKE_DL_LIBS})
    if(name STREQUAL "fuzz_onnx")
      target_link_libraries(${name} PRIVATE dinoml_import_onnx)
    endif()
    target_compile_options(${name} PRIVATE ${_dml_san_cflags})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_compile_definitions(${name} PRIVATE DINOML_SOURCE_DIR="${CMAKE_SOURCE_DIR}" DINOML_BINARY_DIR="${CMAKE_BINARY_DIR}")
  endforeach()
endif()

# tests/cpp/cli (the .npy reader's regression tests) needs the CLI library, which the generic
# per-area test rule does not link.
if(TARGET dinoml_cli_tests)
  target_link_libraries(dinoml_cli_tests PRIVATE dinoml_cli_lib)
endif()
