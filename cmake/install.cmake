# `cmake --install BUILD --prefix P`: the C++ push/pull client as a library for other projects
# (docs/worker-api.md). Installs
#   P/include/sieve/   the public headers, in the tree's layout (worker/client/ps_client.h,
#                      kernels/selection.h, kernels/compressor.h, kernels/device.h,
#                      kernels/value_precision.h, base/status.h,
#                      base/version.h): what ps_client.h includes and nothing of net/ or proto/;
#   P/lib/             the static libraries the client links (client, net, proto, kernels, base);
#   P/lib/cmake/sieve/ the package: find_package(sieve) defines sieve::client, whose interface
#                      adds P/include/sieve to the include path and requires C++20.
# The other libraries are exported only because the static client needs them at link time; their
# headers are not installed. ZeroMQ, protobuf, glog, OpenMP and Threads are found again by the
# package (cmake/sieveConfig.cmake.in) and linked, never included.
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

set(sieve_include_dest ${CMAKE_INSTALL_INCLUDEDIR}/sieve)
install(FILES ${PROJECT_SOURCE_DIR}/worker/client/ps_client.h
              ${PROJECT_SOURCE_DIR}/worker/client/worker_start.h
              ${PROJECT_SOURCE_DIR}/worker/client/worker_progress.h
        DESTINATION ${sieve_include_dest}/worker/client)
install(FILES ${PROJECT_SOURCE_DIR}/kernels/selection.h ${PROJECT_SOURCE_DIR}/kernels/compressor.h
              ${PROJECT_SOURCE_DIR}/kernels/device.h ${PROJECT_SOURCE_DIR}/kernels/value_precision.h
        DESTINATION ${sieve_include_dest}/kernels)
install(FILES ${PROJECT_SOURCE_DIR}/base/status.h ${PROJECT_BINARY_DIR}/generated/base/version.h
        DESTINATION ${sieve_include_dest}/base)

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
