# ROCm target (issue 7).
#
# The GPU kernel sources are one set (kernels/cuda/*.cu, written in CUDA spelling; the target spec
# is kernels/cuda/gpu_target.h). Where Debian's hipcc (ROCm 5.2) exists, the same files are
# compiled with `hipcc -x hip` into one libdinoml_rocm_kernels.so per GPU arch:
#   ${CMAKE_BINARY_DIR}/rocm/<arch>/libdinoml_rocm_kernels.so
# One library per arch because the lock-step width differs (gfx90a: 64-lane wavefronts; gfx1030 and
# gfx1100: wave32, HIP has no wave64 on GFX10+) and host code sizes launches by it. New .cu files
# are picked up by the glob. gfx1100 is built only when this hipcc can (Debian's ROCm 5.2 has no
# gfx1100 device libraries); `--target rocm --arch gfx1100` then says which toolchain is needed.
# Nothing here needs (or runs on) an AMD GPU.
option(DINOML_ROCM "Build the ROCm kernel libraries when hipcc is found" ON)
if(DINOML_SANITIZE OR DINOML_FUZZ)
  set(DINOML_ROCM OFF)
endif()
find_program(DINOML_HIPCC hipcc)
set(DINOML_HAVE_ROCM OFF)
set(DINOML_ROCM_BUILT_ARCHS "")
if(DINOML_ROCM AND DINOML_HIPCC)
  # arch → lock-step width (DML_GPU_WARP_SIZE)
  set(DINOML_ROCM_ARCH_WIDTHS "gfx90a:64" "gfx1030:32" "gfx1100:32")
  file(GLOB DINOML_GPU_KERNEL_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
  file(GLOB DINOML_GPU_KERNEL_HDR CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.h ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cuh
       ${CMAKE_SOURCE_DIR}/kernels/common/dinoml/pad_index.h ${CMAKE_SOURCE_DIR}/kernels/common/dinoml/half.h)
  set(probe_dir ${CMAKE_BINARY_DIR}/rocm/probe)
  file(MAKE_DIRECTORY ${probe_dir})
  file(WRITE ${probe_dir}/probe.hip "#include <hip/hip_runtime.h>\n__global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n")
  set(rocm_targets "")
  foreach(aw ${DINOML_ROCM_ARCH_WIDTHS})
    string(REPLACE ":" ";" aw_list ${aw})
    list(GET aw_list 0 arch)
    list(GET aw_list 1 width)
    execute_process(COMMAND ${DINOML_HIPCC} -x hip --offload-arch=${arch} -c ${probe_dir}/probe.hip -o ${probe_dir}/${arch}.o
                    RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
    if(NOT probe_rc EQUAL 0)
      message(STATUS "DinoML ROCm: ${DINOML_HIPCC} cannot build ${arch} (no device libraries for it): skipped")
      continue()
    endif()
    set(out_dir ${CMAKE_BINARY_DIR}/rocm/${arch})
    set(objs "")
    foreach(src ${DINOML_GPU_KERNEL_SRC})
      get_filename_component(stem ${src} NAME_WE)
      set(obj ${out_dir}/obj/${stem}.o)
      add_custom_command(OUTPUT ${obj}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}/obj
        COMMAND ${DINOML_HIPCC} -x hip -std=c++17 -O3 -fPIC -fvisibility=hidden --offload-arch=${arch}
                -DDML_GPU_WARP_SIZE=${width} "-DDML_CUDA_LIBRARY_ARCHS=\"${arch}\""
                -ffile-prefix-map=${CMAKE_SOURCE_DIR}=. -I${CMAKE_SOURCE_DIR}/kernels/cuda -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/kernels/common
                -c ${src} -o ${obj}
        DEPENDS ${src} ${DINOML_GPU_KERNEL_HDR}
        COMMENT "hipcc ${arch}: ${stem}.cu"
        VERBATIM)
      list(APPEND objs ${obj})
    endforeach()
    set(so ${out_dir}/libdinoml_rocm_kernels.so)
    add_custom_command(OUTPUT ${so}
      COMMAND ${DINOML_HIPCC} -shared -fPIC --offload-arch=${arch} ${objs} -o ${so}
              -Wl,-soname,libdinoml_rocm_kernels.so -Wl,--build-id=sha1
      DEPENDS ${objs}
      COMMENT "hipcc ${arch}: libdinoml_rocm_kernels.so"
      VERBATIM)
    add_custom_target(dinoml_rocm_kernels_${arch} ALL DEPENDS ${so})
    list(APPEND rocm_targets dinoml_rocm_kernels_${arch})
    list(APPEND DINOML_ROCM_BUILT_ARCHS ${arch})
  endforeach()
  if(rocm_targets)
    add_custom_target(dinoml_rocm_kernels DEPENDS ${rocm_targets})
    set(DINOML_HAVE_ROCM ON)
    message(STATUS "DinoML ROCm: kernel libraries for ${DINOML_ROCM_BUILT_ARCHS} with ${DINOML_HIPCC}")
  endif()
else()
  message(STATUS "DinoML ROCm: hipcc not found (apt-get install hipcc libamdhip64-dev): the ROCm kernel libraries "
                 "and ROCm artifact tests are skipped; --target rocm will report it")
endif()

if(TARGET dinoml_rocm_tests)
  string(REPLACE ";" "," rocm_arch_list "${DINOML_ROCM_BUILT_ARCHS}")
  target_compile_definitions(dinoml_rocm_tests PRIVATE DINOML_HAVE_ROCM=$<BOOL:${DINOML_HAVE_ROCM}>
                             DINOML_ROCM_BUILT_ARCHS="${rocm_arch_list}")
  if(TARGET dinoml_rocm_kernels)
    add_dependencies(dinoml_rocm_tests dinoml_rocm_kernels)
  endif()
endif()
if(TARGET dinoml_rocm_tests)
  # The artifact tests trace the Python examples (tests/cpp/rocm/compile_example.py).
  if(TARGET _dinoml)
    add_dependencies(dinoml_rocm_tests _dinoml)
  endif()
endif()
