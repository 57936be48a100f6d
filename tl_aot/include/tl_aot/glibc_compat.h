// Force-included (`-include tl_aot/glibc_compat.h`) into every host unit of a tl_aot library.
//
// glibc 2.34 moved dlopen, dlsym, dlerror, dladdr and pthread_once from libdl/libpthread into libc and gave
// them a new symbol version (GLIBC_2.34). A library linked on such a system would need glibc >= 2.34
// to load, which excludes RHEL 8 and Ubuntu 20.04, where torch runs. Binding the references to the
// symbols' original versions keeps the library loadable on every glibc since the baseline of the
// architecture; link_library() also links libdl.so.2 / libpthread.so.0 by name so that older
// glibcs, where those versions live there, find them.
#ifndef TL_AOT_GLIBC_COMPAT_H_
#define TL_AOT_GLIBC_COMPAT_H_

#if defined(__linux__)
#include <features.h>  // defines __GLIBC__ on glibc (not on musl, whose symbols are unversioned)
#endif
#if defined(__GLIBC__)
#if defined(__x86_64__)
#define TL_AOT_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define TL_AOT_GLIBC_BASE "GLIBC_2.17"
#endif
#ifdef TL_AOT_GLIBC_BASE
__asm__(".symver dlopen,dlopen@" TL_AOT_GLIBC_BASE);
__asm__(".symver dlsym,dlsym@" TL_AOT_GLIBC_BASE);
__asm__(".symver dlerror,dlerror@" TL_AOT_GLIBC_BASE);
__asm__(".symver dlclose,dlclose@" TL_AOT_GLIBC_BASE);
__asm__(".symver dladdr,dladdr@" TL_AOT_GLIBC_BASE);
__asm__(".symver pthread_once,pthread_once@" TL_AOT_GLIBC_BASE);
#undef TL_AOT_GLIBC_BASE
#endif
#endif

#endif  // TL_AOT_GLIBC_COMPAT_H_
