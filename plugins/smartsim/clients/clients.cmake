# The tensor client for users' own programs and SmartSim-Scaling's --languages: the C API (libfanout_tensor_client,
# fanout_tensor_client.h), the Fortran module, the Python package, and the scaling clients the smartsim plugin
# starts (fanout-tensor-client-{c,fortran,python}). Installed with a pkg-config file, fanout-tensor-client.pc.
set(TC_DIR ${CMAKE_CURRENT_SOURCE_DIR}/smartsim)
add_library(fanout_tensor_client SHARED ${TC_DIR}/tensor_client_c.cpp)
target_link_libraries(fanout_tensor_client PRIVATE smartsim_client Threads::Threads)
target_include_directories(fanout_tensor_client PUBLIC $<BUILD_INTERFACE:${TC_DIR}>)
# Only the C API is exported: smartsim_client's objects are built with hidden visibility.
set_target_properties(fanout_tensor_client PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR} VERSION 1.0.0 SOVERSION 1)

# Programs find the library next to them in the build tree and in <prefix>/lib once installed.
set(TC_PROGRAM_PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR} INSTALL_RPATH "$ORIGIN/../lib")
add_executable(fanout-tensor-client-c ${TC_DIR}/clients/scaling_client.c)
target_link_libraries(fanout-tensor-client-c PRIVATE fanout_tensor_client)
set_target_properties(fanout-tensor-client-c PROPERTIES ${TC_PROGRAM_PROPERTIES})

# The module's procedures in a library of their own (as SmartRedis's libsmartredis-fortran): C users need no libgfortran.
add_library(fanout_tensor_client_fortran SHARED ${TC_DIR}/clients/fanout_tensor_client.f90)
set_target_properties(fanout_tensor_client_fortran PROPERTIES Fortran_MODULE_DIRECTORY ${CMAKE_BINARY_DIR}/fortran
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR} VERSION 1.0.0 SOVERSION 1 INSTALL_RPATH "$ORIGIN")
target_include_directories(fanout_tensor_client_fortran PUBLIC ${CMAKE_BINARY_DIR}/fortran)
target_link_libraries(fanout_tensor_client_fortran PUBLIC fanout_tensor_client)
add_executable(fanout-tensor-client-fortran ${TC_DIR}/clients/scaling_client.f90)
target_link_libraries(fanout-tensor-client-fortran PRIVATE fanout_tensor_client_fortran)
set_target_properties(fanout-tensor-client-fortran PROPERTIES ${TC_PROGRAM_PROPERTIES})

# Python: Debian's interpreter, whose numpy is python3-numpy (a python3 earlier on PATH may have neither).
set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "the Python the tensor client's package is built for")
find_package(Python 3 REQUIRED COMPONENTS Interpreter Development.Module)
set(PYBIND11_FINDPYTHON ON)
find_package(pybind11 CONFIG REQUIRED)
set(TC_PYTHON_DIR ${CMAKE_BINARY_DIR}/python/fanout_tensor_client)
pybind11_add_module(fanout_tensor_client_python MODULE ${TC_DIR}/clients/python/binding.cpp)
target_link_libraries(fanout_tensor_client_python PRIVATE fanout_tensor_client)
set(TC_PYTHON_INSTALL lib/python3.${Python_VERSION_MINOR}/dist-packages)  # on Debian's sys.path under /usr/local
set_target_properties(fanout_tensor_client_python PROPERTIES OUTPUT_NAME _native LIBRARY_OUTPUT_DIRECTORY ${TC_PYTHON_DIR}
                      INSTALL_RPATH "$ORIGIN/../../..")
configure_file(${TC_DIR}/clients/python/fanout_tensor_client/__init__.py ${TC_PYTHON_DIR}/__init__.py COPYONLY)
configure_file(${TC_DIR}/clients/python/scaling_client.py ${CMAKE_BINARY_DIR}/fanout-tensor-client-python COPYONLY
               FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
add_dependencies(fanout_smartsim fanout-tensor-client-c fanout-tensor-client-fortran fanout_tensor_client_python)

configure_file(${TC_DIR}/clients/fanout-tensor-client.pc.in ${CMAKE_BINARY_DIR}/fanout-tensor-client.pc @ONLY)
configure_file(${TC_DIR}/clients/fanout-tensor-client-fortran.pc.in ${CMAKE_BINARY_DIR}/fanout-tensor-client-fortran.pc @ONLY)
install(TARGETS fanout_tensor_client fanout_tensor_client_fortran LIBRARY DESTINATION lib)
install(TARGETS fanout-tensor-client-c fanout-tensor-client-fortran RUNTIME DESTINATION bin)
install(PROGRAMS ${CMAKE_BINARY_DIR}/fanout-tensor-client-python DESTINATION bin)
install(FILES ${TC_DIR}/fanout_tensor_client.h ${CMAKE_BINARY_DIR}/fortran/fanout_tensor_client.mod DESTINATION include/fanout)
install(TARGETS fanout_tensor_client_python LIBRARY DESTINATION ${TC_PYTHON_INSTALL}/fanout_tensor_client)
install(FILES ${TC_DIR}/clients/python/fanout_tensor_client/__init__.py DESTINATION ${TC_PYTHON_INSTALL}/fanout_tensor_client)
install(FILES ${CMAKE_BINARY_DIR}/fanout-tensor-client.pc ${CMAKE_BINARY_DIR}/fanout-tensor-client-fortran.pc DESTINATION lib/pkgconfig)
