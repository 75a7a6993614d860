# Install rules (docs/deploy.md). One layout serves `cmake --install` and the wheels:
#
#   <P>/lib/libdinoml_runtime.so, libdinoml_cpu_kernels.so, provider and GPU kernel libraries
#   <P>/lib/cmake/DinoML/DinoMLConfig.cmake (+ version, targets): find_package(DinoML), DinoML::runtime
#   <P>/include/dinoml/*.h, *.hpp                 public headers (C ABI, C++ wrapper)
#   <P>/share/dinoml/{include,kernels/*}/         headers generated modules are compiled against
#   <P>/bin/dinoml                                the C++ CLI (not in wheels: the console script is Python's)
#
# `cmake --install build --prefix P` installs exactly that. A wheel (scikit-build-core sets SKBUILD)
# puts the same tree under the `dinoml` package folder, P = site-packages/dinoml, next to the Python
# files and the extensions (RPATH $ORIGIN/lib). The compiler finds <P>/lib and <P>/share/dinoml
# from the file it was loaded from (src/build/toolchain.cpp), so an install is relocatable.
# DINOML_RUNTIME_ONLY installs the runtime half only (the dinoml-runtime package).
include(CMakePackageConfigHelpers)

if(SKBUILD)
  set(_dml_p "dinoml/")
else()
  set(_dml_p "")
endif()
set(DINOML_INSTALL_LIBDIR "${_dml_p}lib")
set(DINOML_INSTALL_INCLUDEDIR "${_dml_p}include")
set(DINOML_INSTALL_HOMEDIR "${_dml_p}share/dinoml")
set(DINOML_INSTALL_CMAKEDIR "${_dml_p}lib/cmake/DinoML")

# ---- runtime library, public headers, CMake package ---------------------------------------
target_include_directories(dinoml_runtime INTERFACE $<INSTALL_INTERFACE:${DINOML_INSTALL_INCLUDEDIR}>)
set_target_properties(dinoml_runtime PROPERTIES EXPORT_NAME runtime)  # DinoML::runtime
install(TARGETS dinoml_runtime EXPORT DinoMLTargets
        LIBRARY DESTINATION ${DINOML_INSTALL_LIBDIR} COMPONENT runtime)
install(FILES include/dinoml/runtime.h include/dinoml/runtime.hpp include/dinoml/module_abi.h
        DESTINATION ${DINOML_INSTALL_INCLUDEDIR}/dinoml COMPONENT runtime)
install(EXPORT DinoMLTargets NAMESPACE DinoML:: DESTINATION ${DINOML_INSTALL_CMAKEDIR} COMPONENT runtime)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/DinoMLConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/packaging/DinoMLConfig.cmake
                              INSTALL_DESTINATION ${DINOML_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/DinoMLConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/packaging/DinoMLConfig.cmake ${CMAKE_BINARY_DIR}/packaging/DinoMLConfigVersion.cmake
        DESTINATION ${DINOML_INSTALL_CMAKEDIR} COMPONENT runtime)

# ---- Python package ------------------------------------------------------------------------
# Wheels only: `cmake --install` of a developer build leaves Python to the source tree.
if(SKBUILD AND TARGET _dinoml_rt)
  set_target_properties(_dinoml_rt PROPERTIES INSTALL_RPATH "$ORIGIN/lib")
  install(TARGETS _dinoml_rt LIBRARY DESTINATION dinoml COMPONENT python)
  if(DINOML_RUNTIME_ONLY)
    # dinoml.runtime and what it imports; `import dinoml` then says the compiler is absent.
    install(FILES python/dinoml/__init__.py python/dinoml/_ext.py python/dinoml/errors.py python/dinoml/runtime.py
                  python/dinoml/weights.py
            DESTINATION dinoml COMPONENT python)
  else()
    install(DIRECTORY python/dinoml/ DESTINATION dinoml COMPONENT python
            FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  endif()
endif()

if(DINOML_RUNTIME_ONLY)
  return()
endif()

# ---- compiler side: kernel libraries, headers for module builds, CLI -------------------------
install(TARGETS dinoml_cpu_kernels LIBRARY DESTINATION ${DINOML_INSTALL_LIBDIR} COMPONENT compiler)
foreach(_t dinoml_cpu_onednn dinoml_cpu_openblas dinoml_cuda_kernels)
  if(TARGET ${_t})
    install(TARGETS ${_t} LIBRARY DESTINATION ${DINOML_INSTALL_LIBDIR} COMPONENT compiler)
  endif()
endforeach()
foreach(_arch ${DINOML_ROCM_BUILT_ARCHS})
  install(FILES ${CMAKE_BINARY_DIR}/rocm/${_arch}/libdinoml_rocm_kernels.so
          DESTINATION ${DINOML_INSTALL_LIBDIR}/rocm/${_arch} COMPONENT compiler)
endforeach()
install(FILES include/dinoml/compiler.hpp DESTINATION ${DINOML_INSTALL_INCLUDEDIR}/dinoml COMPONENT compiler)
install(DIRECTORY include/ DESTINATION ${DINOML_INSTALL_HOMEDIR}/include COMPONENT compiler)
foreach(_k common cpu cuda)
  install(DIRECTORY kernels/${_k}/ DESTINATION ${DINOML_INSTALL_HOMEDIR}/kernels/${_k} COMPONENT compiler
          FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.cuh")
endforeach()

if(SKBUILD)
  if(TARGET _dinoml)
    set_target_properties(_dinoml PROPERTIES INSTALL_RPATH "$ORIGIN/lib")
    install(TARGETS _dinoml LIBRARY DESTINATION dinoml COMPONENT python)
  endif()
else()
  set_target_properties(dinoml PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
  install(TARGETS dinoml RUNTIME DESTINATION bin COMPONENT compiler)
endif()
