/* cache.c - the compile cache: objects on disk, keyed by everything that went into them.
 *
 * One file per entry, named by a 64-bit hash of the key. The file holds the whole key, which a
 * lookup compares byte for byte (a hash collision is a miss, never wrong code), and a checksum
 * of the object (a truncated or damaged entry is removed and reported as a miss). Entries are
 * written to a temporary file in the same directory and renamed into place, so a reader sees a
 * whole entry or none, and two processes writing the same entry at once both succeed.
 *
 * Code loaded from the cache runs in the process, so the directory must be the user's own: one
 * owned by another user (through a symlink, say) or writable by others is refused (rt_cache_open)
 * and the compile goes on without the cache. Entries are opened without following symlinks.
 * A writer killed in the middle leaves only its temporary file, which a later store removes once
 * it is an hour old.
 *
 * An entry:   offset  size
 *             0       8    magic "NESTOBJ\n"
 *             8       4    format version (little-endian, like every number here)
 *             12      4    header size (48)
 *             16      8    key length
 *             24      8    object length
 *             32      8    hash of the key (the file name)
 *             40      8    checksum of the object
 *             48           the key, then the object
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nest.h"
#include "rt.h"

#define MAGIC "NESTOBJ\n"
#define VERSION 1
#define HEADER 48

/* A 64-bit hash, a word at a time (FNV-1a's step on words, with a fold of the high half).
 * Each step is a bijection of the state for a given word, so two inputs of the same length that
 * differ in one word always hash differently: a damaged byte is always caught. */
static uint64_t hash64(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    const uint64_t prime = 0x100000001b3ull;
    h ^= n;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * prime;
        h ^= h >> 32;
    }
    for (; n > 0; s++, n--)
        h = (h ^ *s) * prime;
    h ^= h >> 29;
    return h * prime;
}

#define KEY_SEED 0xcbf29ce484222325ull
#define OBJ_SEED 0x84222325cbf29ce4ull

/* Header fields are little-endian, `bytes` wide, whatever the host. */
static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

char *rt_cache_dir(void)
{
    const char *off = getenv("NEST_CACHE");
    if (off && strcmp(off, "0") == 0)
        return NULL;
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') /* the XDG spec ignores relative paths */
        return rt_strf("%s/nest", xdg);
    const char *home = getenv("HOME");
    if (home && home[0])
        return rt_strf("%s/.cache/nest", home);
    return NULL;
}

static char *entry_path(const char *dir, uint64_t h)
{
    return rt_strf("%s/%016llx.obj", dir, (unsigned long long)h);
}

static bool read_all(int fd, void *p, size_t n)
{
    unsigned char *s = p;
    while (n > 0) {
        ssize_t r = read(fd, s, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        s += r;
        n -= (size_t)r;
    }
    return true;
}

bool rt_write_all(int fd, const void *p, size_t n)
{
    const unsigned char *s = p;
    while (n > 0) {
        ssize_t r = write(fd, s, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        s += r;
        n -= (size_t)r;
    }
    return true;
}

void *rt_cache_get(const char *dir, const void *key, size_t keylen, size_t *objlen)
{
    *objlen = 0;
    if (!dir || !key)
        return NULL;
    uint64_t h = hash64(key, keylen, KEY_SEED);
    char *path = entry_path(dir, h);
    if (!path)
        return NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        free(path);
        return NULL;
    }

    unsigned char hd[HEADER];
    unsigned char *data = NULL;
    bool corrupt = true;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        corrupt = false; /* not ours to remove */
        goto miss;
    }
    if ((uint64_t)st.st_size < HEADER || !read_all(fd, hd, HEADER) ||
        memcmp(hd, MAGIC, 8) != 0 || get_le(hd + 8, 4) != VERSION ||
        get_le(hd + 12, 4) != HEADER)
        goto miss;
    uint64_t klen = get_le(hd + 16, 8), olen = get_le(hd + 24, 8);
    uint64_t body = (uint64_t)st.st_size - HEADER;
    if (klen > body || olen != body - klen || olen == 0 || (size_t)body != body)
        goto miss; /* truncated, or trailing bytes */
    if (klen != keylen || get_le(hd + 32, 8) != h) {
        corrupt = false; /* another key with the same hash: a miss, not damage */
        goto miss;
    }
    data = malloc((size_t)body);
    if (!data) {
        corrupt = false;
        goto miss;
    }
    if (!read_all(fd, data, (size_t)body))
        goto miss;
    if (memcmp(data, key, keylen) != 0) {
        corrupt = false;
        goto miss;
    }
    if (hash64(data + klen, (size_t)olen, OBJ_SEED) != get_le(hd + 40, 8))
        goto miss;
    close(fd);
    free(path);
    memmove(data, data + klen, (size_t)olen);
    void *obj = realloc(data, (size_t)olen);
    *objlen = (size_t)olen;
    return obj ? obj : data;

miss:
    close(fd);
    free(data);
    if (corrupt)
        unlink(path); /* rebuilt and rewritten by the caller */
    free(path);
    return NULL;
}

/* mkdir -p with mode 0700 for the directories it creates. */
static bool make_dirs(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode);
    char *p = rt_strf("%s", dir);
    if (!p)
        return false;
    bool ok = true;
    for (char *s = p + 1; ok; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            ok = false;
        *s = c;
        if (c == '\0')
            break;
    }
    free(p);
    return ok && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

int rt_cache_open(const char *dir, char **why)
{
    *why = NULL;
    errno = 0;
    if (!make_dirs(dir)) {
        int e = errno ? errno : ENOTDIR;
        *why = rt_strf("the cache directory %s cannot be made (%s): not using the cache", dir,
                       strerror(e));
        return *why ? NEST_ERR_IO : NEST_ERR_NOMEM;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        *why = rt_strf("the cache directory %s is not a directory: not using the cache", dir);
        return *why ? NEST_ERR_IO : NEST_ERR_NOMEM;
    }
    if (st.st_uid != geteuid())
        *why = rt_strf("the cache directory %s belongs to user %ld, not to this user (%ld): not "
                       "using the cache",
                       dir, (long)st.st_uid, (long)geteuid());
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        *why = rt_strf("the cache directory %s is writable by %s (mode %03o): not using the "
                       "cache (chmod 700 %s)",
                       dir, (st.st_mode & S_IWOTH) ? "every user" : "its group",
                       (unsigned)(st.st_mode & 0777), dir);
    else
        return NEST_OK;
    return *why ? NEST_ERR_IO : NEST_ERR_NOMEM;
}

/* Temporary files of writers that died (killed mid-write): ours, and untouched for an hour. */
#define STALE_SECONDS 3600

static void remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (de->d_name[0] != '.' || n < 5 || strcmp(de->d_name + n - 4, ".tmp") != 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == geteuid() && st.st_mtime < now - STALE_SECONDS)
            unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
}

int rt_cache_put(const char *dir, const void *key, size_t keylen, const void *obj,
                 size_t objlen)
{
    static atomic_uint counter;
    if (!dir || !key || !obj || objlen == 0)
        return EINVAL;
    errno = 0;
    if (!make_dirs(dir))
        return errno ? errno : ENOTDIR;
    uint64_t h = hash64(key, keylen, KEY_SEED);
    char *path = entry_path(dir, h);
    if (!path)
        return ENOMEM;

    /* A name no other writer uses: the pid, a counter and the clock; O_EXCL makes sure. */
    char *tmp = NULL;
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        free(tmp);
        tmp = rt_strf("%s/.%016llx.%ld.%u.%lx.tmp", dir, (unsigned long long)h, (long)getpid(),
                      atomic_fetch_add(&counter, 1), (unsigned long)ts.tv_nsec);
        if (!tmp)
            break;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int e = tmp ? errno : ENOMEM;
        free(tmp);
        free(path);
        return e;
    }

    unsigned char hd[HEADER];
    memcpy(hd, MAGIC, 8);
    put_le(hd + 8, VERSION, 4);
    put_le(hd + 12, HEADER, 4);
    put_le(hd + 16, keylen, 8);
    put_le(hd + 24, objlen, 8);
    put_le(hd + 32, h, 8);
    put_le(hd + 40, hash64(obj, objlen, OBJ_SEED), 8);
    int e = 0;
    errno = 0;
    if (!(rt_write_all(fd, hd, HEADER) && rt_write_all(fd, key, keylen) &&
          rt_write_all(fd, obj, objlen)))
        e = errno ? errno : EIO;
    if (close(fd) != 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e)
        unlink(tmp); /* a full disk, say: no entry, and no partial file left */
    free(tmp);
    free(path);
    remove_stale(dir);
    return e;
}
