/*
 * driver.h - what the files of driver/ share: the state object of nest.h (state.c), which the
 * compiled kernels of driver.c are called with.
 */
#ifndef NEST_DRIVER_H
#define NEST_DRIVER_H

#include <pthread.h>

#include "internal.h"

/* The values of a module's state. `t` comes first and is what the generated code's NAME_state
 * is: an array of pointers to the tensors, in declaration order. */
struct nest_state {
    void **t;
    int n;
    struct nest_st_desc *d; /* per tensor: name, type, shape, initializer (state_code.h) */
    int64_t *bytes;         /* per tensor: its size in bytes */
    void *block;            /* every tensor, in one allocation */
    size_t size;            /* bytes of all tensors */
    uint64_t layout;        /* ir_state_layout_hash of the module */
    char errmsg[512];       /* of the last failed save or load: kept without allocating */
    pthread_mutex_t lock;   /* held by each call, save and load with this state object */
    bool locked_init;       /* lock was initialized (nest_state_free destroys it) */
};

/* Take and release st's lock (NULL: nothing), around whatever reads or writes its tensors. */
void state_lock(nest_state *st);
void state_unlock(nest_state *st);

/* Checks that st fits a function of a module whose state has `nstates` tensors and layout hash
 * `layout` (ir_state_layout_hash), and that no array of args and results (of the given sizes
 * in bytes) lies in st's tensors. NEST_OK, or NEST_ERR_CALL with a malloc'd message in *msg
 * (NULL when out of memory). */
int state_check_call(const nest_state *st, int nstates, uint64_t layout, const char *fname,
                     void *const *args, int nargs, const int64_t *arg_bytes, void *const *results,
                     int nresults, const int64_t *res_bytes, char **msg);

#endif /* NEST_DRIVER_H */
