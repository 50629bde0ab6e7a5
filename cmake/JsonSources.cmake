# mgc_sources_including(HEADER OUT): the project's .cpp files that include
# HEADER, directly or through the project's own headers, relative to the
# source root. Found by scanning the #include lines, so that a new file
# cannot be left out of a list kept by hand.
function(mgc_sources_including header out)
  file(GLOB_RECURSE files RELATIVE ${PROJECT_SOURCE_DIR}
       ${PROJECT_SOURCE_DIR}/support/*.h ${PROJECT_SOURCE_DIR}/support/*.cpp
       ${PROJECT_SOURCE_DIR}/ir/*.h ${PROJECT_SOURCE_DIR}/ir/*.cpp
       ${PROJECT_SOURCE_DIR}/frontend/*.h ${PROJECT_SOURCE_DIR}/frontend/*.cpp
       ${PROJECT_SOURCE_DIR}/passes/*.h ${PROJECT_SOURCE_DIR}/passes/*.cpp
       ${PROJECT_SOURCE_DIR}/runtime/*.h ${PROJECT_SOURCE_DIR}/runtime/*.cpp
       ${PROJECT_SOURCE_DIR}/backend/*.h ${PROJECT_SOURCE_DIR}/backend/*.cpp
       ${PROJECT_SOURCE_DIR}/tools/*.h ${PROJECT_SOURCE_DIR}/tools/*.cpp
       ${PROJECT_SOURCE_DIR}/fuzz/*.cpp)
  set(includers "")
  set(headers ${header})
  set(changed TRUE)
  while(changed)
    set(changed FALSE)
    foreach(file ${files})
      if(file IN_LIST includers)
        continue()
      endif()
      file(STRINGS ${PROJECT_SOURCE_DIR}/${file} lines REGEX "^#include \"")
      foreach(line ${lines})
        string(REGEX REPLACE "^#include \"([^\"]*)\".*" "\\1" included "${line}")
        if(included IN_LIST headers)
          list(APPEND includers ${file})
          if(file MATCHES "\\.h$")
            list(APPEND headers ${file})
          endif()
          set(changed TRUE)
          break()
        endif()
      endforeach()
    endforeach()
  endwhile()
  list(FILTER includers INCLUDE REGEX "\\.cpp$")
  set(${out} ${includers} PARENT_SCOPE)
endfunction()
