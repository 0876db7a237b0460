/* trivial.c - a program that does nothing, for the start time with and without libnest.so
 * (built twice by the Makefile: with -DWITH_NEST it calls one libnest function, so the library
 * is loaded, but never compiles anything). */
#ifdef WITH_NEST
#include "nest.h"
#endif

int main(void)
{
#ifdef WITH_NEST
    return nest_status_str(0)[0] == 'o' ? 0 : 1;
#else
    return 0;
#endif
}
