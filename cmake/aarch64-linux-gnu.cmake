# Cross-compiling for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu.
#
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# Target libraries (PCRE2, utf8proc, jansson) come from Debian multiarch packages
# (libpcre2-dev:arm64, libutf8proc-dev:arm64, libjansson-dev:arm64), found through their arm64
# pkg-config files; they pull in libc6:arm64, which runs the binaries.
# Tests run under qemu-user with every optional CPU feature on (-cpu max),
# so the dotprod and i8mm kernels execute too; scripts/test-arm.sh installs
# all of this.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# Headers and libraries of the target: the cross libc's root, then the
# multiarch directories (/usr/lib/aarch64-linux-gnu) of the :arm64 packages.
# Programs (pkg-config, the emulator) are the build machine's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config must read the arm64 .pc files only, never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest (and add_test COMMAND <target>) run target binaries through qemu.
# -cpu max turns on dotprod, i8mm, fp16...  No -L /usr/aarch64-linux-gnu:
# the :arm64 packages bring Debian's arm64 libc into /lib/aarch64-linux-gnu,
# and qemu would then pair the cross package's ld.so with that libc.so (it
# falls back to host paths for what the -L root lacks); two glibc builds
# disagree on ld.so's private data, and the first pthread_create spins
# forever.  The multiarch loader at /lib/ld-linux-aarch64.so.1 and its own
# libc are a consistent pair.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-cpu;max)
