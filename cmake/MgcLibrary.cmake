# mgc_add_library(NAME DEPS...): one library per component directory, made of
# every .cpp in it, so adding a file needs no edit here.
function(mgc_add_library name)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(${name} STATIC ${sources})
  target_link_libraries(${name} PUBLIC ${ARGN})
endfunction()
