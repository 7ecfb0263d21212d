# Warnings, sanitizers and ccache, applied to every kiln target through kiln_target_defaults.
include_guard(GLOBAL)

find_program(KILN_CCACHE ccache)
if(KILN_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  # Paths under the source tree are hashed relative to it (base_dir, and no working
  # directory), and objects name them relative too, so that a clone elsewhere (CI's clean
  # clone) reuses this checkout's cache entries: a cold build takes 20 minutes on 2 cores.
  set(CMAKE_CXX_COMPILER_LAUNCHER
      "${CMAKE_COMMAND};-E;env;CCACHE_BASEDIR=${CMAKE_SOURCE_DIR};CCACHE_NOHASHDIR=1;${KILN_CCACHE}")
  add_compile_options("-ffile-prefix-map=${CMAKE_SOURCE_DIR}/=")
endif()

function(kiln_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                                           -Wnon-virtual-dtor -Wimplicit-fallthrough)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # g++ 12 at -O3 reports -Wrestrict inside libstdc++'s std::string operator+ (GCC bug
    # 105329, a false positive); the warning stays on for clang.
    target_compile_options(${target} PRIVATE -Wno-restrict)
  else()
    target_compile_options(${target} PRIVATE -Wno-unknown-warning-option -Wshadow-uncaptured-local)
  endif()
  if(KILN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(KILN_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${KILN_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${KILN_SANITIZE})
  endif()
  if(KILN_FUZZ)
    # Coverage instrumentation for libFuzzer in every target; only the fuzzer links its main.
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()
