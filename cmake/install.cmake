# `cmake --install BUILD --prefix P`: the C++ push/pull client as a library for other projects
# (docs/worker-api.md). Installs
#   P/include/sieve/   the public headers, in the tree's layout (worker/client/ps_client.h,
#                      kernels/selection.h, kernels/compressor.h, kernels/device.h,
#                      kernels/value_precision.h, base/status.h, base/version.h): what
#                      ps_client.h includes and nothing of net/ or proto/. A consumer includes
#                      them as <sieve/worker/client/ps_client.h>, and they include each other so,
#                      so that a project with its own base/status.h does not collide with them;
#   P/lib/             the static libraries the client links (client, net, proto, kernels, base);
#   P/lib/cmake/sieve/ the package: find_package(sieve) defines sieve::client, whose interface
#                      adds P/include to the include path and requires C++20;
#   P/lib/pkgconfig/sieve.pc, the same for builds without CMake (`pkg-config --cflags --libs
#                      sieve`; relocatable: its prefix is found from the file's own place).
# The other libraries are exported only because the static client needs them at link time; their
# headers are not installed. ZeroMQ, protobuf, glog, OpenMP and Threads are found again by the
# package (cmake/sieveConfig.cmake.in) and linked, never included.
#
# The installed headers are generated into BUILD/include/sieve/ at configure time (re-run when one
# of them changes): each public header with its includes of the other public headers prefixed
# "sieve/". The build tree's sieve::client has BUILD/include on its include path too, so the
# in-tree example includes them as an installed consumer does.
include(CMakePackageConfigHelpers)

set(sieve_install_targets sieve_ps_client sieve_net sieve_proto sieve_proto_gen sieve_kernels
    sieve_base)
if(TARGET sieve_kernels_cuda)
  list(APPEND sieve_install_targets sieve_kernels_cuda)
endif()
foreach(t ${sieve_install_targets})
  if(NOT t STREQUAL "sieve_ps_client")
    string(REGEX REPLACE "^sieve_" "" name ${t})
    set_target_properties(${t} PROPERTIES EXPORT_NAME ${name})
  endif()
endforeach()

install(TARGETS ${sieve_install_targets} EXPORT sieveTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(sieve_public_headers worker/client/ps_client.h worker/client/worker_start.h
    worker/client/worker_progress.h kernels/selection.h kernels/compressor.h kernels/device.h
    kernels/value_precision.h base/status.h base/version.h)
foreach(h ${sieve_public_headers})
  if(h STREQUAL "base/version.h")
    set(src ${PROJECT_BINARY_DIR}/generated/${h})
  else()
    set(src ${PROJECT_SOURCE_DIR}/${h})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  endif()
  file(READ ${src} text)
  foreach(other ${sieve_public_headers})
    string(REPLACE "#include \"${other}\"" "#include \"sieve/${other}\"" text "${text}")
  endforeach()
  set(dst ${PROJECT_BINARY_DIR}/include/sieve/${h})
  set(old "")
  if(EXISTS ${dst})
    file(READ ${dst} old)
  endif()
  if(NOT old STREQUAL text)  # unchanged: left alone, so nothing that includes it rebuilds
    file(WRITE ${dst} "${text}")
  endif()
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/sieve DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# pkg-config: the archives in link order, then what they need (as the CMake package finds it).
set(sieve_pc_libs "-lsieve_ps_client -lsieve_net -lsieve_proto -lsieve_proto_gen -lsieve_kernels")
if(TARGET sieve_kernels_cuda)
  string(APPEND sieve_pc_libs " -lsieve_kernels_cuda -lsieve_base ${SIEVE_CUDART_STATIC} -ldl -lrt")
else()
  string(APPEND sieve_pc_libs " -lsieve_base")
endif()
file(RELATIVE_PATH sieve_pc_up /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${CMAKE_CURRENT_LIST_DIR}/sieve.pc.in ${PROJECT_BINARY_DIR}/sieve.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/sieve.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(sieve_package_dest ${CMAKE_INSTALL_LIBDIR}/cmake/sieve)
install(EXPORT sieveTargets NAMESPACE sieve:: DESTINATION ${sieve_package_dest})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/sieveConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/sieveConfig.cmake
                              INSTALL_DESTINATION ${sieve_package_dest})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sieveConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sieveConfig.cmake ${PROJECT_BINARY_DIR}/sieveConfigVersion.cmake
        DESTINATION ${sieve_package_dest})
