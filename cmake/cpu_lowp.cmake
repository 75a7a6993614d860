# Native low-precision CPU GEMMs: bf16 with AVX512_BF16 vdpbf16ps and int8 with AVX512_VNNI
# vpdpbusd, AMX tiles where present. The compute is in kernels/cpu/avx512_lowp/ with its own flags;
# the C ABI, checks and packing are in kernels/cpu/gemm_lowp.cpp (baseline flags), which checks
# the CPU at call time and refuses with DML_CPU_ERR_UNSUPPORTED, so these instructions never run on
# a CPU without them. Benchmark: bench/ops/gemm_lowp_bench.cpp.
file(GLOB DINOML_CPU_LOWP_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cpu/avx512_lowp/*.cpp)
target_sources(dinoml_cpu_kernels PRIVATE ${DINOML_CPU_LOWP_SRC})
set_source_files_properties(${DINOML_CPU_LOWP_SRC} PROPERTIES COMPILE_OPTIONS
  "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mavx512vnni;-mamx-tile;-mamx-bf16;-mamx-int8;-mfma;-Wno-maybe-uninitialized")
# (-Wno-maybe-uninitialized: GCC 12 reports its own avx512 intrinsic headers' `__Y = __Y` idiom.)

if(EXISTS ${CMAKE_SOURCE_DIR}/bench/ops/gemm_lowp_bench.cpp)
  add_executable(gemm_lowp_bench ${CMAKE_SOURCE_DIR}/bench/ops/gemm_lowp_bench.cpp)
  target_include_directories(gemm_lowp_bench PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cpu ${CMAKE_SOURCE_DIR}/kernels/common)
  target_link_libraries(gemm_lowp_bench PRIVATE dinoml_cpu_kernels OpenMP::OpenMP_CXX)
  target_compile_options(gemm_lowp_bench PRIVATE -O2)
  find_path(DINOML_LOWP_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp)
  find_library(DINOML_LOWP_DNNL_LIB dnnl)
  if(DINOML_LOWP_DNNL_INCLUDE AND DINOML_LOWP_DNNL_LIB)
    target_compile_definitions(gemm_lowp_bench PRIVATE DINOML_BENCH_ONEDNN=1)
    target_include_directories(gemm_lowp_bench PRIVATE ${DINOML_LOWP_DNNL_INCLUDE})
    target_link_libraries(gemm_lowp_bench PRIVATE ${DINOML_LOWP_DNNL_LIB})
  endif()
endif()

# Objects built above the baseline ISA must share no inline code with the rest of the library
# (cmake/scripts/check_isa_objects.cmake says why).
if(DINOML_BUILD_TESTS)
  add_test(NAME CpuIsaObjects.ShareNoInlineCode
           COMMAND ${CMAKE_COMMAND} -DOBJ_DIR=${CMAKE_BINARY_DIR}/CMakeFiles/dinoml_cpu_kernels.dir
                   -DNM=${CMAKE_NM} -P ${CMAKE_SOURCE_DIR}/cmake/scripts/check_isa_objects.cmake)
endif()
