/* Compile the vendored xxHash (BSD-2, third_party/xxhash/LICENSE) into each extension that includes
 * this header, fully inlined: no shared library and no symbol clashes with python-xxhash.
 *
 * Small inputs use the inlined scalar XXH3 (no call overhead). Large buffers go through the
 * runtime ISA dispatcher on x86 (SSE2/AVX2/AVX-512, chosen per CPU, as python-xxhash does), so
 * a wheel built with baseline flags still hashes big outputs at the machine's full speed. */
#ifndef LOOPCORE_XXH_INLINE_H
#define LOOPCORE_XXH_INLINE_H
#define XXH_INLINE_ALL
#include "xxhash.h"

#if defined(LOOPCORE_XXH_DISPATCH) && LOOPCORE_XXH_DISPATCH
#  define XXH_DISPATCH_DISABLE_REPLACE
#  include "xxh_x86dispatch.h"
static inline XXH64_hash_t loopcore_xxh3_large(const void* p, size_t n) {
    return XXH3_64bits_dispatch(p, n);
}
#else
static inline XXH64_hash_t loopcore_xxh3_large(const void* p, size_t n) {
    return XXH3_64bits(p, n);
}
#endif
#endif
