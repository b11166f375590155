// Included by both sources of two_sources: what flavour() returns depends on what the including source defined
// before it, and each source is its own translation unit.
#pragma once

static inline int flavour() {
#ifdef FLAVOUR_A
    return 1;
#else
    return 2;
#endif
}
