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
