# longctx_proto_library(NAME proto_file...): C++ code for .proto files under the
# source root, generated to ${CMAKE_BINARY_DIR}/<same path> so that
# #include "model/config.pb.h" works from anywhere.
function(longctx_proto_library name)
  set(srcs)
  foreach(proto ${ARGN})
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${proto})
    string(REGEX REPLACE "\\.proto$" "" stem ${rel})
    set(out_cc ${CMAKE_BINARY_DIR}/${stem}.pb.cc)
    set(out_h ${CMAKE_BINARY_DIR}/${stem}.pb.h)
    add_custom_command(
      OUTPUT ${out_cc} ${out_h}
      COMMAND protobuf::protoc --cpp_out=${CMAKE_BINARY_DIR} -I${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/${rel}
      DEPENDS ${CMAKE_SOURCE_DIR}/${rel} protobuf::protoc
      COMMENT "protoc ${rel}")
    list(APPEND srcs ${out_cc} ${out_h})
  endforeach()
  add_library(${name} ${srcs})
  target_link_libraries(${name} PUBLIC protobuf::libprotobuf)
  target_compile_options(${name} PRIVATE -Wno-unused)
endfunction()
