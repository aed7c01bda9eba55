# The checked text substitution the ganesha_patch_*.cmake steps make their
# edits with (include()d by them; SRC is Ganesha's source tree).
#
# edit(FILE ANCHOR NEW): FILE's one ANCHOR becomes NEW; fails the build,
# naming the step (CMAKE_CURRENT_LIST_FILE's name) and FILE, when ANCHOR is
# not there (Ganesha's text moved).
function(edit _rel _anchor _new)
  set(_file "${SRC}/src/${_rel}")
  file(READ "${_file}" _text)
  string(FIND "${_text}" "${_anchor}" _at)
  if(_at EQUAL -1)
    get_filename_component(_step "${CMAKE_CURRENT_LIST_FILE}" NAME_WE)
    message(FATAL_ERROR "${_step}: anchor not found in ${_rel}")
  endif()
  string(REPLACE "${_anchor}" "${_new}" _text "${_text}")
  file(WRITE "${_file}" "${_text}")
endfunction()

# edit_once(FILE MARKER): ends the calling step (return() of a macro) when
# FILE already carries MARKER, so that its edits, whose first one adds the
# marker, are made once.
macro(edit_once _once_rel _once_marker)
  file(READ "${SRC}/src/${_once_rel}" _once_text)
  string(FIND "${_once_text}" "${_once_marker}" _once_at)
  if(NOT _once_at EQUAL -1)
    return()
  endif()
endmacro()
