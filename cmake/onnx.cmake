# ONNX import (issue 5): src/import/onnx/ on protobuf with the onnx.proto that Debian's libonnx-dev
# ships, using its prebuilt libonnx_proto.so and generated header <onnx/onnx-ml.pb.h> (no protoc
# step in this build). The importer is its own static library linked into the CLI and the Python
# extension; the compiler core does not depend on it.
find_package(Protobuf REQUIRED)
find_package(ONNX CONFIG REQUIRED)
file(GLOB DINOML_ONNX_IMPORT_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/import/onnx/*.cpp)
add_library(dinoml_import_onnx STATIC ${DINOML_ONNX_IMPORT_SRC})
target_include_directories(dinoml_import_onnx PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(dinoml_import_onnx PUBLIC dinoml_compiler onnx_proto protobuf::libprotobuf)
target_link_libraries(dinoml_cli_lib PUBLIC dinoml_import_onnx)
if(TARGET dinoml_onnx_tests)
  target_link_libraries(dinoml_onnx_tests PRIVATE dinoml_import_onnx)
endif()

# A fixed representative subset of the ONNX backend node tests (CI); the full run is
# scripts/onnx-conformance.
set(DINOML_ONNX_NODE_DATA /usr/share/libonnx-testdata/data/node)
if(DINOML_BUILD_TESTS AND EXISTS ${DINOML_ONNX_NODE_DATA})
  add_test(NAME onnx_conformance_subset
    COMMAND dinoml onnx-conformance ${DINOML_ONNX_NODE_DATA}
            --cases-file ${CMAKE_SOURCE_DIR}/tests/onnx/conformance_subset.txt --jobs 2 --require-all-pass)
  set_tests_properties(onnx_conformance_subset PROPERTIES TIMEOUT 900)
endif()
if(TARGET _dinoml)
  target_link_libraries(_dinoml PRIVATE dinoml_import_onnx)
endif()
