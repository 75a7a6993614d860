# CUDA target (issue 4).
#
# * The CUDA lowering (src/lower/cuda) is text generation and is always part of the compiler:
#   `--target cuda` then needs nvcc only when an artifact is built, and says so when it is missing.
# * libdinoml_cuda_kernels.so (kernels/cuda) ships inside CUDA artifacts. It is built whenever a
#   CUDA compiler is found, for sm_80 and sm_90a only (one fatbin; sm_86 GPUs run the sm_80 code),
#   which keeps CI's 2-core build lean. Without nvcc the build goes on and says so.
# * tests/cpp/cuda (dinoml_cuda_tests) compiles a real sm_90a artifact and checks its files and
#   manifest without running it (CI has nvcc but no GPU).
file(GLOB DINOML_CUDA_LOWER_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/lower/cuda/*.cpp)
target_sources(dinoml_compiler PRIVATE ${DINOML_CUDA_LOWER_SRC})

include(CheckLanguage)
option(DINOML_CUDA "Build the CUDA kernel library when a CUDA compiler is found" ON)
if(DINOML_SANITIZE OR DINOML_FUZZ)
  # Sanitizer/fuzz flags go on every target (fuzz_sanitize.cmake) and nvcc rejects them; those
  # builds test host code, so the CUDA library is left out of them.
  set(DINOML_CUDA OFF)
  message(STATUS "DinoML CUDA: kernel library skipped in sanitizer/fuzz builds")
endif()
if(DINOML_CUDA AND NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(DINOML_CUDA)
  check_language(CUDA)
endif()
if(DINOML_CUDA AND CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(NOT TARGET CUDA::cublasLt)
    # A toolkit without cuBLAS (a minimal nvcc install): NVIDIA's cuBLAS wheel, which
    # scripts/venv.sh installs into .venv/ in that case, has the header and libcublasLt.so.13.
    file(GLOB _dml_lt_dirs ${CMAKE_SOURCE_DIR}/.venv/lib/python3*/site-packages/nvidia/cu13)
    find_path(DINOML_CUBLAS_ROOT include/cublasLt.h HINTS ${_dml_lt_dirs} NO_DEFAULT_PATH)
    if(DINOML_CUBLAS_ROOT AND EXISTS ${DINOML_CUBLAS_ROOT}/lib/libcublasLt.so.13)
      add_library(CUDA::cublasLt SHARED IMPORTED)
      set_target_properties(CUDA::cublasLt PROPERTIES
        IMPORTED_LOCATION ${DINOML_CUBLAS_ROOT}/lib/libcublasLt.so.13
        INTERFACE_INCLUDE_DIRECTORIES ${DINOML_CUBLAS_ROOT}/include)
      message(STATUS "DinoML CUDA: cuBLASLt from ${DINOML_CUBLAS_ROOT}")
    endif()
  endif()
endif()
if(DINOML_CUDA AND CMAKE_CUDA_COMPILER AND NOT TARGET CUDA::cublasLt)
  message(WARNING "DinoML CUDA: nvcc found but no cuBLASLt (run scripts/venv.sh, which installs NVIDIA's "
                  "cuBLAS wheel into .venv/, or install the toolkit's libcublas): the CUDA kernel library is skipped")
  set(DINOML_CUDA_USABLE OFF)
elseif(DINOML_CUDA AND CMAKE_CUDA_COMPILER)
  set(DINOML_CUDA_USABLE ON)
endif()
if(DINOML_CUDA_USABLE)
  file(GLOB DINOML_CUDA_KERNELS_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
  add_library(dinoml_cuda_kernels SHARED ${DINOML_CUDA_KERNELS_SRC})
  # The top-level -Wall/-Wextra/-ffile-prefix-map are host-compiler flags nvcc would reject.
  set_property(TARGET dinoml_cuda_kernels PROPERTY COMPILE_OPTIONS "")
  target_compile_options(dinoml_cuda_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 -Xcompiler=-fvisibility=hidden>)
  target_include_directories(dinoml_cuda_kernels PUBLIC ${CMAKE_SOURCE_DIR}/kernels/cuda ${CMAKE_SOURCE_DIR}/include)
  target_include_directories(dinoml_cuda_kernels PRIVATE ${CMAKE_SOURCE_DIR}/kernels/common)  # dinoml/pad_index.h
  target_compile_definitions(dinoml_cuda_kernels PRIVATE DML_CUDA_LIBRARY_ARCHS="sm_80,sm_90a")
  set_target_properties(dinoml_cuda_kernels PROPERTIES
    CUDA_ARCHITECTURES "80-real;90a-real"
    CUDA_RUNTIME_LIBRARY Shared
    CUDA_STANDARD 17
    CUDA_VISIBILITY_PRESET hidden
    # Inside an artifact the library finds lib/libcudart.so.13 next to itself; cuBLASLt comes
    # from the system. No build paths in the shipped bytes.
    BUILD_WITH_INSTALL_RPATH ON
    INSTALL_RPATH "$ORIGIN")
  target_link_libraries(dinoml_cuda_kernels PRIVATE CUDA::cudart CUDA::cublasLt)
  add_dependencies(dinoml_compiler dinoml_cuda_kernels)
  set(DINOML_HAVE_CUDA ON)
  message(STATUS "DinoML CUDA: kernel library for sm_80,sm_90a with ${CMAKE_CUDA_COMPILER} (CUDA ${CUDAToolkit_VERSION})")
else()
  set(DINOML_HAVE_CUDA OFF)
  message(STATUS "DinoML CUDA: no CUDA compiler found (install the CUDA toolkit, or set CMAKE_CUDA_COMPILER): "
                 "the CUDA kernel library and CUDA artifact tests are skipped; --target cuda will report it")
endif()

if(TARGET dinoml_cuda_tests)
  target_compile_definitions(dinoml_cuda_tests PRIVATE DINOML_HAVE_CUDA=$<BOOL:${DINOML_HAVE_CUDA}>)
  target_link_libraries(dinoml_cuda_tests PRIVATE ${CMAKE_DL_LIBS})
endif()
