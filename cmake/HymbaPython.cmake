# Whether to build the Python package (python/, docs/python.md): a pybind11
# extension over hymba_lib. AUTO builds it when Python 3's development files
# and pybind11 (Debian: python3-dev, pybind11-dev) are found; ON requires
# them; OFF skips it. The sanitizer builds (asan, fuzz) never build it: the
# extension would need the sanitizer runtimes preloaded into python3.
# Sets HYMBA_PYTHON_ENABLED.
set(HYMBA_PYTHON AUTO CACHE STRING "Build the Python package: AUTO (when Python 3 dev + pybind11 are found), ON, OFF")
set_property(CACHE HYMBA_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(HYMBA_PYTHON_ENABLED OFF)
if(HYMBA_SANITIZE OR HYMBA_FUZZ)
  if(HYMBA_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "HYMBA_PYTHON=ON cannot be combined with HYMBA_SANITIZE or HYMBA_FUZZ")
  endif()
elseif(NOT HYMBA_PYTHON STREQUAL "OFF")
  # pybind11's own FindPython path (Python, not Python3) finds the interpreter
  # and the module development files together.
  set(PYBIND11_FINDPYTHON ON)
  # Debian's interpreter first (not a pyenv/venv one earlier in PATH): numpy,
  # pytest and pandas come from Debian packages. -DPython_EXECUTABLE=... picks another.
  if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3 COMPONENTS Interpreter Development.Module QUIET)
  if(Python_FOUND)
    find_package(pybind11 CONFIG QUIET)
  endif()
  if(Python_FOUND AND pybind11_FOUND)
    set(HYMBA_PYTHON_ENABLED ON)
    message(STATUS "Python package: building (Python ${Python_VERSION}, pybind11 ${pybind11_VERSION})")
  elseif(HYMBA_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "HYMBA_PYTHON=ON but Python 3 development files or pybind11 were not found: install the "
                        "Debian packages python3-dev and pybind11-dev (scripts/setup.sh --python)")
  else()
    message(STATUS "Python package: not built (needs python3-dev and pybind11-dev; scripts/setup.sh --python)")
  endif()
endif()
