# CPU GEMM: per-ISA kernel sources, the vendor "provider" candidate libraries and the op benchmark.
#
# kernels/cpu/*.cpp are globbed into dinoml_cpu_kernels by the top-level file; the per-ISA folders
# are added here, each with its own flags (the driver picks a path by CPUID at load time).
file(GLOB DINOML_CPU_AVX2_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cpu/avx2/*.cpp)
target_sources(dinoml_cpu_kernels PRIVATE ${DINOML_CPU_AVX2_SRC})
set_source_files_properties(${DINOML_CPU_AVX2_SRC} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
# AVX-512 tables: only ever called after CPUID says AVX-512 F/BW/VL/DQ are there (gemm.cpp's
# choose_isa), so the library still loads and runs on AVX2-only CPUs. These sources must not emit
# inline or template functions that other objects share (the linker could keep the AVX-512 copy for
# everyone): keep them self-contained; `nm -C` of the object lists only avx512_kernels() as global.
file(GLOB DINOML_CPU_AVX512_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cpu/avx512/*.cpp)
target_sources(dinoml_cpu_kernels PRIVATE ${DINOML_CPU_AVX512_SRC})
set_source_files_properties(${DINOML_CPU_AVX512_SRC} PROPERTIES COMPILE_OPTIONS
                            "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
# The VNNI kernels of the repacked quantized GEMM (qgemm_packed_kernels.h), called only on CPUs with
# AVX512_VNNI.
set_source_files_properties(${CMAKE_SOURCE_DIR}/kernels/cpu/avx512/qgemm_packed_vnni.cpp PROPERTIES COMPILE_OPTIONS
                            "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")

# The kernel tests link the library directly (they test its C ABI, including internal paths
# selected through dml_cpu_gemm_select_isa).
if(TARGET dinoml_kernels_tests)
  target_link_libraries(dinoml_kernels_tests PRIVATE dinoml_cpu_kernels OpenMP::OpenMP_CXX)
  target_include_directories(dinoml_kernels_tests PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cpu)
endif()

# Providers: each vendor library is wrapped in its own small shared library with DinoML's GEMM
# signature, so an artifact carries (and links) a vendor only when the profiler chose it.
# Provider `name` (kernels/cpu/providers/<name>_gemm.cpp -> dinoml_cpu_<name>) when its vendor's
# header folder `include` and library `lib` were found; else a status line naming the package.
function(dinoml_cpu_provider name include lib vendor package)
  if(include AND lib AND EXISTS ${CMAKE_SOURCE_DIR}/kernels/cpu/providers/${name}_gemm.cpp)
    add_library(dinoml_cpu_${name} SHARED ${CMAKE_SOURCE_DIR}/kernels/cpu/providers/${name}_gemm.cpp)
    target_include_directories(dinoml_cpu_${name} PRIVATE ${include} ${CMAKE_SOURCE_DIR}/kernels/cpu)
    target_link_libraries(dinoml_cpu_${name} PRIVATE ${lib} OpenMP::OpenMP_CXX)
    set_target_properties(dinoml_cpu_${name} PROPERTIES CXX_VISIBILITY_PRESET hidden)
  else()
    message(STATUS "${vendor} not found (apt-get install ${package}): the ${name} GEMM candidate is not built")
  endif()
endfunction()

find_path(DINOML_DNNL_INCLUDE dnnl.hpp)
find_library(DINOML_DNNL_LIB dnnl)
dinoml_cpu_provider(onednn "${DINOML_DNNL_INCLUDE}" "${DINOML_DNNL_LIB}" oneDNN libdnnl-dev)

find_path(DINOML_CBLAS_INCLUDE cblas.h PATH_SUFFIXES x86_64-linux-gnu/openblas-pthread openblas)
find_library(DINOML_OPENBLAS_LIB openblas)
dinoml_cpu_provider(openblas "${DINOML_CBLAS_INCLUDE}" "${DINOML_OPENBLAS_LIB}" OpenBLAS libopenblas-dev)

# bench/ops/gemm_bench: DinoML vs the providers in one process (docs/benchmarks.md).
if(TARGET dinoml_cpu_onednn AND TARGET dinoml_cpu_openblas AND EXISTS ${CMAKE_SOURCE_DIR}/bench/ops/gemm_bench.cpp)
  add_executable(gemm_bench ${CMAKE_SOURCE_DIR}/bench/ops/gemm_bench.cpp)
  target_include_directories(gemm_bench PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cpu ${CMAKE_SOURCE_DIR}/kernels/common)
  target_link_libraries(gemm_bench PRIVATE dinoml_cpu_kernels dinoml_cpu_onednn dinoml_cpu_openblas OpenMP::OpenMP_CXX)
  target_compile_options(gemm_bench PRIVATE -O2)
endif()

# bench/ops/conv_kernel_bench: one conv kernel call timed in isolation (docs/benchmarks.md).
add_executable(conv_kernel_bench ${CMAKE_SOURCE_DIR}/bench/ops/conv_kernel_bench.cpp)
target_include_directories(conv_kernel_bench PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cpu ${CMAKE_SOURCE_DIR}/kernels/common)
target_link_libraries(conv_kernel_bench PRIVATE dinoml_cpu_kernels)
target_compile_options(conv_kernel_bench PRIVATE -O2)
