# Run by `cmake --install`: copies batch_scripts/*.sh to <prefix>/share/fanout/batch_scripts with the installed
# driver as their default FANOUT. sbatch and qsub run a copy of the script from their spool, so a script cannot
# find the driver relative to itself; the prefix is written in instead (FANOUT in the environment still wins).
get_filename_component(source_dir "${CMAKE_CURRENT_LIST_DIR}/../batch_scripts" ABSOLUTE)
set(dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/share/fanout/batch_scripts")
file(MAKE_DIRECTORY "${dest}")
file(GLOB scripts "${source_dir}/*.sh")
foreach(script ${scripts})
  get_filename_component(name "${script}" NAME)
  file(READ "${script}" text)
  string(FIND "${text}" "FANOUT=\${FANOUT:-fanout}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${script}: no line FANOUT=\${FANOUT:-fanout} to point at the installed driver")
  endif()
  string(REPLACE "FANOUT=\${FANOUT:-fanout}" "FANOUT=\${FANOUT:-${CMAKE_INSTALL_PREFIX}/bin/fanout}" text "${text}")
  message(STATUS "Installing: ${dest}/${name}")
  file(WRITE "${dest}/${name}" "${text}")
  file(CHMOD "${dest}/${name}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
