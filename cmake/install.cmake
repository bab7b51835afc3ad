# `cmake --install build --prefix P`: what an engine's build and CI need from
# conform — the command, the plugin ABI header, and find_package(conform).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS conform conform-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# LibTorch and friends may live outside the loader's default paths.
set_target_properties(conform PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
# The plugin C ABI: version 2 (plugin.h), the types every version shares, and
# version 1.x (plugin_v1.h, frozen), which older plugins keep building against.
install(FILES ${PROJECT_SOURCE_DIR}/impls/include/conform/plugin.h ${PROJECT_SOURCE_DIR}/impls/include/conform/plugin_types.h
        ${PROJECT_SOURCE_DIR}/impls/include/conform/plugin_v1.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/conform)
install(FILES ${PROJECT_SOURCE_DIR}/impls/PLUGINS.md ${PROJECT_SOURCE_DIR}/impls/WORKERS.md
        ${PROJECT_SOURCE_DIR}/docs/python-workers.md ${PROJECT_SOURCE_DIR}/docs/pytest.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The Python side of the worker protocol, and the example workers to start from.
install(FILES ${PROJECT_SOURCE_DIR}/python/conform_worker.py DESTINATION ${CMAKE_INSTALL_DATADIR}/conform/python)
# conform.check and the pytest plugin (docs/pytest.md): PYTHONPATH=P/share/conform/python
# finds them, and they find P/bin/conform.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/conform DESTINATION ${CMAKE_INSTALL_DATADIR}/conform/python
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/impls/worker_example/numpy_worker.py
        ${PROJECT_SOURCE_DIR}/impls/worker_example/torch_worker.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/conform/python/examples)

# The ABI version, read from the header so there is one place to change it.
file(STRINGS ${PROJECT_SOURCE_DIR}/impls/include/conform/plugin.h _abi_line
     REGEX "^#define CONFORM_PLUGIN_ABI_VERSION ")
string(REGEX REPLACE "^#define CONFORM_PLUGIN_ABI_VERSION ([0-9]+)u?.*$" "\\1" CONFORM_PLUGIN_ABI_VERSION "${_abi_line}")

set(CONFORM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/conform)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/conformConfig.cmake.in
  ${PROJECT_BINARY_DIR}/conformConfig.cmake
  INSTALL_DESTINATION ${CONFORM_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
# 0.x: a minor release may change the plugin ABI, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/conformConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/conformConfig.cmake ${PROJECT_BINARY_DIR}/conformConfigVersion.cmake
        DESTINATION ${CONFORM_CMAKE_DIR})
